#!/usr/bin/env bash
# Quick start: set everything up, then run the main job on the bundled demo model.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# The demo model (tiny, random weights: it produces noise) is made on first use.
# Until the workbench exists, the main job speaks a sentence into demo.wav.
.venv/bin/kazeia info demo
.venv/bin/kazeia say --model demo --speaker vivian --language english --stream \
    --text "Hello from Kazeia, the local speech workbench." -o demo.wav
echo "listen: demo.wav (random weights: noise, at the speed and length real speech would have)"
