#!/usr/bin/env bash
# Sets up everything and runs the whole test suite, including the live check against the
# official PyTorch reference (its own venv, .venv-ref). CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh --test
bash tests/reference/setup_venv.sh
export KAZEIA_REQUIRE_REFERENCE=1 OMP_WAIT_POLICY=PASSIVE
exec .venv/bin/python -m pytest tests -ra "$@"
