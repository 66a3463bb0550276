"""The comparison behind the live reference check (no reference venv needed): a float moved within
its stored tolerance passes, one moved beyond it is named, and any change to an integer, a string
or a checkpoint tensor is a mismatch whatever the tolerances."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from golden_diff import compare

HERE = Path(__file__).resolve().parent
GOLDEN = HERE.parents[1] / "tests" / "golden"
TOLERANCE = json.loads((HERE / "reference_spread.json").read_text())["tolerance"]


@pytest.fixture
def copy(tmp_path) -> Path:
    dst = tmp_path / "golden"
    shutil.copytree(GOLDEN, dst)
    return dst


def _edit_npz(path: Path, key: str, change) -> None:
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays[key] = change(arrays[key])
    np.savez(path, **arrays)


def test_identical_goldens_have_no_diff():
    d = compare(GOLDEN, GOLDEN)
    assert not d.mismatches and d.float_diffs and max(d.float_diffs.values()) == 0.0
    # every float quantity of the goldens has a stored tolerance (measure_spread.py covers them all)
    assert set(d.float_diffs) == set(TOLERANCE)


def test_float_moves_are_measured_and_exact_parts_are_not_forgiven(copy):
    q = "decoder_long.npz:wav_chunked"
    tol = TOLERANCE[q]
    _edit_npz(copy / "decoder_long.npz", "wav_chunked", lambda a: a + np.float32(tol / 2) * (np.arange(a.size) % 2 == 0))
    d = compare(GOLDEN, copy)
    assert not d.mismatches
    assert 0 < d.float_diffs[q] <= tol

    _edit_npz(copy / "decoder_long.npz", "wav_chunked", lambda a: a + np.float32(tol * 3))
    assert compare(GOLDEN, copy).float_diffs[q] > tol

    case = "cv_vivian_english_nonstream.npz"
    _edit_npz(copy / case, "codes", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 5, a + 1, a).astype(a.dtype))
    assert any(m.startswith(f"{case}:codes") for m in compare(GOLDEN, copy).mismatches)

    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["decoder_long"]["max_abs_diff_chunked_vs_full"] += 1e-9   # a derived float: measured
    manifest["settings"]["seed"] += 1                                  # an integer: a mismatch
    (copy / "manifest.json").write_text(json.dumps(manifest))
    d = compare(GOLDEN, copy)
    assert d.float_diffs["manifest.json:decoder_long.max_abs_diff_chunked_vs_full"] > 0
    assert any("settings.seed" in m for m in d.mismatches)
