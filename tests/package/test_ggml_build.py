"""The ggml build is what it says: setup.sh checks every built wheel for its backend library
(scripts/check_ggml_wheel.py), and the installed build holds the backend its flavour names."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kazeia.engine.platform_info import BACKEND_LIBRARIES, ggml_build

CHECK = Path(__file__).resolve().parents[2] / "scripts" / "check_ggml_wheel.py"


def _wheel(tmp_path: Path, libraries: list[str]) -> Path:
    wheel = tmp_path / "libggml_python-0.20.2.post1-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for lib in libraries:
            z.writestr(f"libggml/lib64/{lib}", b"\x7fELF")
    return wheel


def _check(flavor: str, wheel: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), flavor, str(wheel)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("flavor", ["vulkan", "cuda"])
def test_a_gpu_wheel_without_its_backend_is_refused(tmp_path, flavor):
    cpu_only = _wheel(tmp_path, ["libggml.so", "libggml-base.so", "libggml-cpu.so"])   # what pip's cache handed back
    r = _check(flavor, cpu_only)
    assert r.returncode == 1
    assert BACKEND_LIBRARIES[flavor] in r.stderr and flavor in r.stderr
    complete = _wheel(tmp_path, ["libggml.so", "libggml-base.so", "libggml-cpu.so", BACKEND_LIBRARIES[flavor]])
    assert _check(flavor, complete).returncode == 0


def test_native_needs_the_cpu_backend_and_bad_files_are_messages(tmp_path):
    assert _check("native", _wheel(tmp_path, ["libggml.so", "libggml-base.so", "libggml-cpu.so"])).returncode == 0
    r = _check("native", _wheel(tmp_path, ["libggml.so", "libggml-base.so"]))
    assert r.returncode == 1 and "libggml-cpu.so" in r.stderr
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"not a zip")
    r = _check("vulkan", broken)
    assert r.returncode == 1 and "broken.whl" in r.stderr and "Traceback" not in r.stderr
    r = _check("metal", broken)
    assert r.returncode == 1 and "unknown ggml flavor" in r.stderr


def test_the_installed_build_holds_its_backend():
    """A venv set up as vulkan or cuda really has that backend (the defect: a CPU wheel labelled vulkan)."""
    build = ggml_build()
    if not build.stamp:
        pytest.skip("ggml was not installed by scripts/setup.sh (no stamp in this environment)")
    if build.flavor in BACKEND_LIBRARIES:
        assert build.flavor in build.backends, f"{build.describe()}: setup.sh installed '{build.flavor}' without its library"
    assert build.stamp.startswith(f"{build.flavor}-0.20.2.post1")
