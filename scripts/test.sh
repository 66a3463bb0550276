#!/usr/bin/env bash
# Sets up everything and runs the whole test suite: the engine against the official PyTorch
# reference (live, in its own venv .venv-ref), the workbench a second time on a virtual X display
# (offscreen hides focus and window-system problems), the engine's tests at every lower CPU level of
# Kazeia's kernels (KAZEIA_CPU=avxvnni where the CPU has it, avx2, generic), the placement and
# workbench tests again with a real non-CPU ggml device (Vulkan on Mesa's lavapipe, a software GPU),
# and last the ARM64 leg under emulation (scripts/arm64.sh test). CI runs exactly this (.ci/run).
# KAZEIA_GGML other than vulkan skips the Vulkan pass.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KAZEIA_GGML="${KAZEIA_GGML:-vulkan}"
bash scripts/setup.sh --test
bash tests/reference/setup_venv.sh
export KAZEIA_REQUIRE_REFERENCE=1 OMP_WAIT_POLICY=PASSIVE
pytest=(.venv/bin/python -m pytest -p no:cacheprovider)

# 1. CPU only (a Vulkan build lists no device until GGML_VK_VISIBLE_DEVICES admits lavapipe)
if command -v xvfb-run >/dev/null; then
  xvfb-run -a -s "-screen 0 1280x800x24" env QT_QPA_PLATFORM=xcb "${pytest[@]}" -q \
    $(ls tests/test_workbench*.py | grep -v _layout)   # (the size test starts X servers of its own)
else
  echo "xvfb-run missing: the X11 pass of the workbench tests is skipped" >&2
fi
env -u GGML_VK_VISIBLE_DEVICES "${pytest[@]}" tests -ra "$@"

# 1b. Kazeia's kernels at every lower CPU level this CPU allows (KAZEIA_CPU caps them; the run above
# used the CPU's own level): the kernel checks, the parity tests against the goldens and the rest of
# the engine's tests again (~2 min each), so the AVX2 and generic paths (most laptops; any other
# CPU) are tested, not assumed. The reference and the workbench are not rerun.
detected="$(.venv/bin/python -c 'from kazeia import _native; print(_native.cpu_level()["detected"])')"
read -r -a lower <<< "$(.venv/bin/python -c 'from kazeia import _native; print(*_native.cpu_level()["available"][1:])')"
for level in "${lower[@]}"; do
  echo "== kernels and parity at KAZEIA_CPU=$level (this CPU: $detected)"
  env -u GGML_VK_VISIBLE_DEVICES KAZEIA_CPU="$level" "${pytest[@]}" tests -q -ra -m "not slow" -k "not accel" \
    --ignore=tests/reference --ignore-glob='tests/test_workbench*.py' "$@"
done

# 2. Vulkan0 on lavapipe: placement tests and the workbench's placement A/B on a real second device
vulkan_pass() {   # (in a subshell: lavapipe's environment stays there)
  eval "$(bash scripts/vulkan_deps.sh lavapipe)"
  devices="$(.venv/bin/kazeia devices)"   # (captured: `| grep -q` closes the pipe on kazeia mid-write)
  grep -q '^Vulkan0' <<< "$devices" || { echo "lavapipe is not visible to ggml" >&2; echo "$devices"; exit 1; }
  # lavapipe compiles each of ggml's pipelines with LLVM on first use, one at a time: on an empty shader
  # cache (a new machine) that is minutes per stage, longer than a test should wait for one take. One
  # accel-sched stream of the demo model compiles what the takes below need, outside any test's time
  # limit, and says how long it took; later runs read the cache (seconds).
  echo "== compiling ggml's Vulkan pipelines for lavapipe (cached in $MESA_SHADER_CACHE_DIR)"
  warm_start=$SECONDS
  .venv/bin/kazeia say --model demo --placement accel-sched --speaker vivian --stream --max-frames 6 \
    --text "Pipelines compiled once." -o "$(mktemp -d)/warm-up.wav"
  echo "   pipelines ready after $(( SECONDS - warm_start )) s"
  echo "== Vulkan pass (lavapipe)"
  "${pytest[@]}" tests/test_placement.py tests/test_workbench*.py -ra -k "placement or accel" "$@"
}
if [[ "$(cut -d- -f1 .venv/.kazeia-ggml)" == vulkan ]]; then
  (vulkan_pass "$@")
else
  echo "ggml is not the Vulkan build (KAZEIA_GGML=$KAZEIA_GGML): the Vulkan pass is skipped" >&2
fi

# 3. ARM64 under emulation (scripts/arm64.sh test): an arm64 Debian root and Kazeia's arm64 build
# (cached in ~/.cache/kazeia/arm64: ~45 min the first time, ~20 min after), the CPU levels of emulated
# cores, the kernel checks at every ARM level and the parity tests. It needs root (a chroot) and an
# x86-64 host; KAZEIA_SKIP_ARM64=1 leaves it out (CI never sets it).
if [[ -n "${KAZEIA_SKIP_ARM64:-}" ]]; then
  echo "KAZEIA_SKIP_ARM64 is set: the ARM64 leg is skipped" >&2
elif [[ "$(uname -m)" != x86_64 || $(id -u) -ne 0 ]]; then
  echo "the ARM64 leg needs root on an x86-64 Linux host (here: $(uname -m), uid $(id -u)): skipped" >&2
else
  echo "== ARM64 leg (emulated)"
  # (the CPU build there: the host's Vulkan flavour, set above for lavapipe, would compile ggml's
  # shaders with glslc under qemu, most of an hour, for a backend the leg does not test)
  KAZEIA_GGML=native bash scripts/arm64.sh test
fi
