#!/usr/bin/env bash
# Create the virtual environment of the peer engine vox-tts (PyPI), which `kazeia bench` then
# measures side by side on the same full-size random checkpoint. Optional: no test needs it.
#
#   bash peers/setup_vox.sh [VENV_DIR]      (default: <repo>/.venv-vox)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${1:-$repo_root/.venv-vox}"
python="${PYTHON:-python3}"
version="0.19.5"

if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "import vox, sys; sys.exit(vox.__version__ != '$version')" 2>/dev/null; then
  echo "vox venv up to date: $venv"
  exit 0
fi
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --disable-pip-version-check -q "vox-tts==$version"
echo "vox-tts $version installed in $venv"
