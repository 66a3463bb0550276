#!/usr/bin/env bash
# Sets up everything and runs the whole test suite: the engine against the official PyTorch
# reference (live, in its own venv .venv-ref), then the workbench a second time on a virtual X
# display (offscreen hides focus and window-system problems). CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --test
bash tests/reference/setup_venv.sh
export KAZEIA_REQUIRE_REFERENCE=1 OMP_WAIT_POLICY=PASSIVE
if command -v xvfb-run >/dev/null; then
  xvfb-run -a -s "-screen 0 1280x800x24" env QT_QPA_PLATFORM=xcb .venv/bin/python -m pytest tests/test_workbench.py -q -p no:cacheprovider
else
  echo "xvfb-run missing: the X11 pass of the workbench tests is skipped" >&2
fi
exec .venv/bin/python -m pytest tests -ra "$@"
