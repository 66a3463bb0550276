#!/usr/bin/env bash
# Create the virtual environment that runs the official Qwen3-TTS reference
# (qwen-tts 0.1.1 on transformers 4.57.3, CPU torch) for build_goldens.py.
#
#   bash tests/reference/setup_venv.sh [VENV_DIR]      (default: <repo>/.venv-ref)
#
# Idempotent: a stamp file inside the venv records the exact install recipe; when
# it matches, nothing is done.  Set PYTHON to choose the interpreter (default
# python3; the torch 2.13.0 CPU wheel needs CPython 3.11 on this project's machines).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${1:-$repo_root/.venv-ref}"
python="${PYTHON:-python3}"
stamp="$venv/.kazeia-reference-stamp"

# The recipe, one pip invocation per line.  torch must be asked for exactly as
# "torch==2.13.0" (resolves to the local CPU wheel); any other spec would pull the
# multi-GB CUDA build.  transformers and qwen-tts go in without their dependency
# pins (qwen-tts would otherwise drag in sox/onnxruntime/torchaudio and other
# versions); the needed dependencies are listed explicitly on the last line.
recipe=(
  "torch==2.13.0"
  "--no-deps transformers==4.57.3 qwen-tts==0.1.1"
  "huggingface_hub<1.0 numpy safetensors tokenizers>=0.22,<=0.23 pyyaml regex requests tqdm packaging einops librosa soundfile"
)
recipe_id="$(printf '%s\n' "${recipe[@]}" | sha256sum | cut -c1-16)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$recipe_id" && -x "$venv/bin/python" ]]; then
  echo "reference venv up to date: $venv"
  exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
  echo "creating $venv with $("$python" --version 2>&1)"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check)

echo "[1/3] torch==2.13.0"
"${pip[@]}" "torch==2.13.0"
echo "[2/3] transformers==4.57.3 qwen-tts==0.1.1 (no deps)"
"${pip[@]}" --no-deps "transformers==4.57.3" "qwen-tts==0.1.1"
echo "[3/3] runtime dependencies"
"${pip[@]}" "huggingface_hub<1.0" numpy safetensors "tokenizers>=0.22,<=0.23" pyyaml regex \
  requests tqdm packaging einops librosa soundfile

# Smoke test: the reference must import (with build_goldens.py's stubs for the
# 25 Hz-only modules sox / onnxruntime / torchaudio).
"$venv/bin/python" "$repo_root/tests/reference/build_goldens.py" --check-env

echo "$recipe_id" > "$stamp"
echo "reference venv ready: $venv"
