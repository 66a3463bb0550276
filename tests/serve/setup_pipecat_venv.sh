#!/usr/bin/env bash
# The virtual environment that runs Pipecat's own Deepgram TTS service against Kazeia's server
# (tests/serve/test_live_sockets.py): Pipecat pins protobuf<7 and soxr 1.0, which the project's
# venv (LiveKit Agents) cannot share, so the agent framework runs as a client in its own interpreter.
#
#   bash tests/serve/setup_pipecat_venv.sh VENV_DIR
#
# Idempotent: a stamp inside the venv records the recipe; when it matches, nothing is done.
set -euo pipefail

venv="$1"
python="${PYTHON:-python3}"
stamp="$venv/.kazeia-pipecat-stamp"
recipe="pipecat-ai==1.14.0"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$recipe" && -x "$venv/bin/python" ]]; then
  echo "pipecat venv up to date: $venv"
  exit 0
fi
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check $recipe
"$venv/bin/python" -c "from pipecat.services.deepgram.tts import DeepgramTTSService" 2>/dev/null
echo "$recipe" > "$stamp"
echo "pipecat venv ready: $venv"
