"""Kazeia's CPU level on emulated arm64 cores (the ARM64 leg, under qemu-user): each core gets the
level its features allow, detected and in force, and every level below it is available."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.arm64

CORES = {"cortex-a53": "neon", "cortex-a72": "neon", "cortex-a76": "dotprod", "neoverse-n1": "dotprod",
         "max": "i8mm"}


@pytest.mark.parametrize("core", CORES)
def test_each_emulated_core_gets_its_level(core):
    if platform.machine() != "aarch64" or "QEMU_CPU" not in os.environ:
        pytest.skip("needs arm64 under qemu-user (scripts/arm64.sh test)")
    from kazeia import _native
    names = _native.cpu_level_names()
    # (qemu-user reads QEMU_CPU as each program starts: a new process gets the core asked for)
    r = subprocess.run([sys.executable, "-c", "import json; from kazeia import _native; print(json.dumps(_native.cpu_level()))"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "QEMU_CPU": core})
    assert r.returncode == 0, r.stderr[-2000:]
    d = json.loads(r.stdout)
    want = CORES[core]
    assert d["detected"] == d["level"] == want, d
    assert d["available"] == names[names.index(want):], d
