"""Kazeia's dependencies on arm64 Debian 12 (Python 3.11, glibc 2.36: also Raspberry Pi OS): the ARM64
leg's root is Debian 13, so every dependency must still come as a wheel that installs on the older
system. pip resolves them for that platform here, installing nothing (it needs PyPI), and the PySide6
it takes is the one pyproject.toml's aarch64 rule allows there. The ARM64 leg runs this on its host."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.arm64_host

DEBIAN12_ARM64 = {"platform_machine": "aarch64", "python_version": "3.11", "python_full_version": "3.11.2",
                  "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
                  "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def requirements_there() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    picked = []
    for line in project["dependencies"] + project["optional-dependencies"]["test"]:
        r = Requirement(line)
        if r.marker is None or r.marker.evaluate(DEBIAN12_ARM64):
            r.marker = None
            picked.append(r)
    return picked


def test_every_dependency_is_a_wheel_for_arm64_debian12(tmp_path):
    reqs = tmp_path / "requirements.txt"
    wanted = requirements_there()
    reqs.write_text("".join(f"{r}\n" for r in wanted))
    platforms = [a for v in range(36, 16, -1) for a in ("--platform", f"manylinux_2_{v}_aarch64")]
    report = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--dry-run",
                        "--ignore-installed", "--target", str(tmp_path / "target"), *platforms,
                        "--platform", "manylinux2014_aarch64", "--platform", "linux_aarch64", "--implementation", "cp",
                        "--python-version", "3.11", "--only-binary=:all:", "--report", str(report), "-r", str(reqs)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    picked = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
              for i in json.loads(report.read_text())["install"]}
    assert "libggml-python" in picked and "numpy" in picked
    pyside = picked["pyside6-essentials"]
    rule = next(r for r in wanted if r.name.lower() == "pyside6-essentials")   # (pyproject's aarch64 rule)
    assert rule.specifier.contains(pyside), (rule, pyside)
    print(f"{len(picked)} packages, all wheels; PySide6-Essentials {pyside}")
