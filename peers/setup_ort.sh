#!/usr/bin/env bash
# Create the virtual environment of the ONNX Runtime peers: the reference's speech decoder exported
# to ONNX and run by onnxruntime (PyPI), as the ONNX ports of Qwen3-TTS run it, which `kazeia bench
# --stage decoder` times beside Kazeia's; and qwen3synth (PyPI; its runtime is onnxvoice on ONNX
# Runtime) on the reference's graphs exported in its bundle layout, which `kazeia bench` times beside
# Kazeia's whole pipeline. Optional: no test needs it.
#
#   bash peers/setup_ort.sh [VENV_DIR]      (default: <repo>/.venv-ort)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${1:-$repo_root/.venv-ort}"
packages=("onnxruntime==1.32.0" "onnx==1.23.2" "onnxscript==0.7.2" "qwen3synth==0.1.0" "onnxvoice==0.2.15")

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import onnxruntime, onnx, onnxscript, qwen_tts, qwen3synth" 2>/dev/null &&
   "$venv/bin/python" -m pip freeze 2>/dev/null | grep -x "${packages[3]}" >/dev/null; then
  echo "ONNX Runtime venv up to date: $venv"
  exit 0
fi
bash "$repo_root/tests/reference/setup_venv.sh" "$venv"   # the reference itself, to export its decoder
"$venv/bin/python" -m pip install --disable-pip-version-check -q "${packages[@]}"
echo "${packages[*]} installed in $venv"
