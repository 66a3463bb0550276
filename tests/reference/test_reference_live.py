"""Live regeneration check: the committed goldens in tests/golden/ are what the official reference
(qwen-tts 0.1.1) produces today, on this CPU.

build_goldens.py runs in a subprocess with the reference venv's interpreter (KAZEIA_REF_PYTHON,
default <repo>/.venv-ref/bin/python) and writes into a temporary folder. Integers (ids, codes,
sampled tokens), strings, JSON structure, checkpoint tensors and text files must be identical.
Floats (arrays and derived JSON values) may move in their last bits on another CPU or with another
thread count, because torch and MKL take other code paths there: each is compared within the
tolerance stored for it in reference_spread.json, calibrated from the reference's own spread
(measure_spread.py: thread counts, torch's and MKL's kernel levels on one machine, and the spread
reported from other CPUs). The largest diffs seen are printed in the run's summary.

Runs in ~30 s on 2 CPUs.  Deselect with  -m "not reference".
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Dict

import pytest

from golden_diff import GoldenDiff, compare

pytestmark = pytest.mark.reference

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(os.environ.get("KAZEIA_GOLDEN_DIR", REPO_ROOT / "tests" / "golden"))
BUILD_SCRIPT = Path(__file__).resolve().with_name("build_goldens.py")
REF_PYTHON = Path(os.environ.get("KAZEIA_REF_PYTHON", REPO_ROOT / ".venv-ref" / "bin" / "python"))
SPREAD_FILE = Path(__file__).resolve().with_name("reference_spread.json")

if not REF_PYTHON.exists() and os.environ.get("KAZEIA_REQUIRE_REFERENCE"):
    # CI sets this: the live check must run there, a missing reference is a failure
    pytest.fail(f"KAZEIA_REQUIRE_REFERENCE is set but {REF_PYTHON} does not exist", pytrace=False)
if not REF_PYTHON.exists():
    pytest.skip(f"reference interpreter not found: {REF_PYTHON} (run tests/reference/setup_venv.sh "
                f"or set KAZEIA_REF_PYTHON)", allow_module_level=True)
if not (GOLDEN_DIR / "manifest.json").exists():
    pytest.skip(f"no committed goldens in {GOLDEN_DIR}", allow_module_level=True)


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.pop("PYTHONPATH", None)   # keep the project's own packages out of the reference venv
    return env


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    probe = subprocess.run([str(REF_PYTHON), str(BUILD_SCRIPT), "--check-env"], capture_output=True,
                           text=True, timeout=300, env=_env())
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"torch/qwen_tts not importable by {REF_PYTHON}: {last}")
    out = tmp_path_factory.mktemp("golden_regenerated")
    run = subprocess.run([str(REF_PYTHON), str(BUILD_SCRIPT), "--out", str(out)], capture_output=True,
                         text=True, timeout=1800, env=_env())
    if run.returncode != 0:
        pytest.fail(f"build_goldens.py failed (rc={run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return out


# ----------------------------------------------------------------------------- tests
@pytest.fixture(scope="module")
def diff(regenerated: Path) -> GoldenDiff:
    return compare(GOLDEN_DIR, regenerated)


def test_exact_parts_are_identical(diff: GoldenDiff):
    """Ids, codes, strings, checkpoint tensors: the same bits on every CPU."""
    assert not diff.mismatches, "\n".join(diff.mismatches[:20])


def test_floats_within_the_reference_spread(diff: GoldenDiff, report):
    spread = json.loads(SPREAD_FILE.read_text())
    tolerance = spread["tolerance"]
    unknown = sorted(set(diff.float_diffs) - set(tolerance))
    assert not unknown, f"no stored tolerance for {unknown[:5]}: rerun tests/reference/measure_spread.py"
    over = {q: (d, tolerance[q]) for q, d in diff.float_diffs.items() if d > tolerance[q]}
    moved = sorted(((d, q) for q, d in diff.float_diffs.items() if d > 0), reverse=True)
    report(f"reference vs committed goldens on this CPU: {len(moved)} of {len(diff.float_diffs)} float quantities "
           f"moved" + ("; largest: " + ", ".join(f"{q} {d:.2e} (tolerance {tolerance[q]:.2e})" for d, q in moved[:3])
                       if moved else " (bit-identical)"))
    assert not over, "beyond the reference's own spread: " + "; ".join(
        f"{q}: |diff| {d:.3e} > {t:.3e}" for q, (d, t) in sorted(over.items()))
