#!/usr/bin/env bash
# Quick start: set everything up, then run the main job on the bundled demo model.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
# The demo model (tiny, random weights, produces noise) is made on first use.
# Until text-to-speech lands (`kazeia say`), the main job describes the demo model.
.venv/bin/kazeia info demo
.venv/bin/kazeia devices
