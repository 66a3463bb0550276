#!/usr/bin/env bash
# Sets up everything and runs the whole test suite: the engine against the official PyTorch
# reference (live, in its own venv .venv-ref), the workbench a second time on a virtual X display
# (offscreen hides focus and window-system problems), then the placement and workbench tests again
# with a real non-CPU ggml device: Vulkan on Mesa's lavapipe (a software GPU). CI runs exactly this
# (.ci/run). KAZEIA_GGML other than vulkan skips the Vulkan pass.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export KAZEIA_GGML="${KAZEIA_GGML:-vulkan}"
bash scripts/setup.sh --test
bash tests/reference/setup_venv.sh
export KAZEIA_REQUIRE_REFERENCE=1 OMP_WAIT_POLICY=PASSIVE
pytest=(.venv/bin/python -m pytest -p no:cacheprovider)

# 1. CPU only (a Vulkan build lists no device until GGML_VK_VISIBLE_DEVICES admits lavapipe)
if command -v xvfb-run >/dev/null; then
  xvfb-run -a -s "-screen 0 1280x800x24" env QT_QPA_PLATFORM=xcb "${pytest[@]}" tests/test_workbench.py -q
else
  echo "xvfb-run missing: the X11 pass of the workbench tests is skipped" >&2
fi
env -u GGML_VK_VISIBLE_DEVICES "${pytest[@]}" tests -ra "$@"

# 2. Vulkan0 on lavapipe: placement tests and the workbench's placement A/B on a real second device
if [[ "$(cut -d- -f1 .venv/.kazeia-ggml)" != vulkan ]]; then
  echo "ggml is not the Vulkan build (KAZEIA_GGML=$KAZEIA_GGML): the Vulkan pass is skipped" >&2
  exit 0
fi
eval "$(bash scripts/vulkan_deps.sh lavapipe)"
.venv/bin/kazeia devices | grep -q '^Vulkan0' || { echo "lavapipe is not visible to ggml" >&2; .venv/bin/kazeia devices; exit 1; }
echo "== Vulkan pass (lavapipe; the first run compiles ggml's pipelines with LLVM, cached in $MESA_SHADER_CACHE_DIR)"
"${pytest[@]}" tests/test_placement.py tests/test_workbench.py -ra -k "placement or accel" "$@"
