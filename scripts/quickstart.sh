#!/usr/bin/env bash
# Quick start: set everything up, then open the workbench on the bundled demo model (tiny, random
# weights: it produces noise, at the speed and length real speech would have). Without a display,
# speak one sentence into demo.wav instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
  exec .venv/bin/kazeia-workbench "$@"
fi
echo "no display: speaking into demo.wav instead of opening the workbench"
.venv/bin/kazeia say --model demo --speaker vivian --language english --stream \
    --text "Hello from Kazeia, the local speech workbench." -o demo.wav
