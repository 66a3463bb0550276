"""Shared fixtures: the committed reference goldens, models converted from them and engines on them;
the gui marker for tests/workbench; measurements printed in the run's summary."""
from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

import pytest

# Before anything imports Qt or sounddevice: no display and no sound card in CI. The ALSA
# configuration adds a capture device that records what the workbench plays.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("PYQTGRAPH_QT_LIB", "PySide6")
_TESTS = Path(__file__).parent
_alsa = _TESTS / "support" / "alsa" / "capture.conf"
os.environ["ALSA_CONFIG_PATH"] = f"/usr/share/alsa/alsa.conf:{_alsa}"
# ALSA resolves the file names once per process: one capture file for the session. The devices pipe
# into a sink that paces them to real time (24 kHz float32 mono, what the workbench plays).
if "KAZEIA_CAPTURE_OUT" not in os.environ:
    os.environ["KAZEIA_CAPTURE_OUT"] = os.path.join(tempfile.mkdtemp(prefix="kazeia-capture-"), "capture.raw")
    _sink = [sys.executable, str(_TESTS / "support" / "alsa" / "paced_sink.py")]
    os.environ["KAZEIA_CAPTURE_FILE"] = "|" + shlex.join([*_sink, os.environ["KAZEIA_CAPTURE_OUT"], str(24000 * 4)])
    os.environ["KAZEIA_SILENT_SINK"] = "|" + shlex.join([*_sink, os.devnull, str(24000 * 4)])

from support.goldens import GOLDEN, checkpoint_dir


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    # the demo model and other caches go to a temporary folder, never the user's
    os.environ["KAZEIA_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="session")
def golden_manifest() -> dict:
    return json.loads((GOLDEN / "manifest.json").read_text())


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """converted(variant, type) -> path of the tiny reference checkpoint converted to GGUF (cached)."""
    from kazeia.engine import convert
    out = tmp_path_factory.mktemp("converted")
    cache: dict[tuple[str, str], Path] = {}

    def get(variant: str, out_type: str = "f32") -> Path:
        key = (variant, out_type)
        if key not in cache:
            path = out / f"tiny-{variant}-{out_type}.gguf"
            convert(checkpoint_dir(variant), path, out_type=out_type, progress=False)
            cache[key] = path
        return cache[key]
    return get


@pytest.fixture(scope="module")
def engines(converted):
    """engines(variant) -> an Engine (2 threads) on the tiny reference checkpoint's f32 conversion."""
    from kazeia.engine import Engine, open_model
    cache = {}

    def get(variant):
        if variant not in cache:
            cache[variant] = Engine(open_model(converted(variant, "f32")), threads=2)
        return cache[variant]
    return get


@pytest.fixture(scope="session")
def emulated() -> bool:
    """True in the ARM64 leg (scripts/arm64.sh sets KAZEIA_TEST_EMULATED=1), where qemu makes every
    step 10-50x slower: a test that repeats one kernel path many times may repeat it fewer times there.
    What each repetition checks is unchanged, and x86-64 runs them all."""
    return os.environ.get("KAZEIA_TEST_EMULATED") == "1"


_MEASUREMENTS: list[str] = []


@pytest.fixture
def report():
    """report("f16 vs f32: ...") - lines printed in the summary of every run (numbers a reader
    of CI output should see, e.g. precision of quantised weights)."""
    return _MEASUREMENTS.append


def pytest_collection_modifyitems(items):
    # a layer's folder says what its tests need: tests/workbench's need Qt (the X11 pass reruns them),
    # but for a module that says NEEDS_QT = False (the session model's)
    for item in items:
        if item.path.is_relative_to(_TESTS / "workbench") and getattr(item.module, "NEEDS_QT", True):
            item.add_marker(pytest.mark.gui)


def pytest_terminal_summary(terminalreporter):
    if _MEASUREMENTS:
        terminalreporter.section("Kazeia measurements")
        for line in _MEASUREMENTS:
            terminalreporter.write_line(line)
