#!/usr/bin/env bash
# One short run on a machine with an NVIDIA GPU (the device tool's lent H200): builds the CUDA ggml
# (cached), installs Kazeia, runs the `accel` tests on the GPU and `kazeia bench --placements` for
# 0.6B (every placement, stage by stage, with accuracy against f32 on the CPU), and writes JSON and
# logs under $OUT (default ./device-check). Run from the repository root:
#
#   bash scripts/device_check.sh            # the device tool: run(command="bash scripts/device_check.sh")
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${OUT:-device-check}"
mkdir -p "$out"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# build only for the GPU that is here (all architectures would take far longer)
if command -v nvidia-smi >/dev/null; then
  cc="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)"
  [[ -n "$cc" ]] && export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_CUDA_ARCHITECTURES=$cc"
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1
fi
{
  echo "== setup (KAZEIA_GGML=cuda)"
  time KAZEIA_GGML=cuda bash scripts/setup.sh --test
} > "$out/setup.log" 2>&1 || { tail -40 "$out/setup.log"; exit 1; }
.venv/bin/kazeia devices --json > "$out/devices.json"
.venv/bin/kazeia devices --check > "$out/devices-check.txt" 2>&1
echo "devices --check exit $?" >> "$out/devices-check.txt"
.venv/bin/python -m pytest -p no:cacheprovider tests -m accel -ra > "$out/test_placement.log" 2>&1
echo "placement tests exit $?" | tee -a "$out/test_placement.log"
threads=$(( $(nproc) > 8 ? 8 : $(nproc) ))
.venv/bin/kazeia bench --placements --size 0.6b --frames 40 --threads "$threads" -q --json "$out/bench-placements-0.6b.json" \
  > "$out/bench.log" 2>&1
echo "bench exit $?"
tail -5 "$out/test_placement.log"; cat "$out/devices-check.txt"
