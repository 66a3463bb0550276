"""The f32 products' NEON form against the x86-64 forms (AVX2, AVX-512): the same seeded weights and
columns, products and convolutions of several shapes (direct and in Winograd's form), made here and in
the arm64 root (scripts/arm64.sh), equal bit for bit: one fused multiply-add chain per output in a
fixed order, on both. The ARM64 leg runs this on the host once its root is set up."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support import products_dump

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.arm64_host


def test_arm64_products_equal_the_x86_ones_bit_for_bit(tmp_path):
    if platform.machine() != "x86_64":
        pytest.skip(f"compares an x86-64 host ({platform.machine()} here) with its arm64 root")
    arm64 = ["bash", str(REPO / "scripts" / "arm64.sh")]
    # (the root lives in the user's cache: not in the temporary one this session's tests use)
    env = {**{k: v for k, v in os.environ.items() if k != "KAZEIA_CACHE_DIR"}, "QEMU_CPU": "max"}
    if subprocess.run([*arm64, "ready"], capture_output=True, env=env).returncode != 0:
        pytest.skip("no arm64 root set up (bash scripts/arm64.sh setup)")
    ours = products_dump.products()
    out = tmp_path / "arm64.npz"
    r = subprocess.run([*arm64, "run", "python", str(REPO / "tests" / "support" / "products_dump.py"), str(out)],
                       capture_output=True, text=True, timeout=1200, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    theirs = np.load(out)
    assert sorted(theirs.files) == sorted(ours)
    differ = [k for k in ours if ours[k].tobytes() != theirs[k].tobytes()]
    assert not differ, f"arm64 differs from x86-64 in {differ}"
    assert len(ours) == 24
