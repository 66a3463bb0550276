"""The workbench at every screen it is made for, on a real X server per size (Xvfb): a portrait
tablet, 1024x768, 1280x800, 1366x768, 1920x1080 and 2560x1600 at scale 2. After a take with a long
name every page is shown and every visible widget walked (tests/support/layout_check.py): no text may be cut
and no widget may lie outside its parent or the screen. Screenshots of each size, light and dark,
go to tests/artifacts/."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from PySide6.QtGui import QImage  # noqa: E402

pytestmark = [pytest.mark.xvfb, pytest.mark.slow]

ARTIFACTS = Path(__file__).parents[1] / "artifacts"
RUNNER = Path(__file__).parents[1] / "support" / "workbench_at_size.py"
# (name, screen, Qt scale factor, theme, touch, expected arrangement)
SIZES = [("portrait-800x1280", (800, 1280), 1, "light", "off", "narrow"),
         ("1024x768", (1024, 768), 1, "light", "off", "narrow"),
         ("1280x800", (1280, 800), 1, "light", "off", "wide"),
         ("1366x768", (1366, 768), 1, "light", "off", "wide"),
         ("1920x1080", (1920, 1080), 1, "light", "off", "wide"),
         ("hidpi-2560x1600-scale2", (2560, 1600), 2, "light", "off", "wide"),
         ("portrait-800x1280-dark", (800, 1280), 1, "dark", "off", "narrow"),
         ("1280x800-dark", (1280, 800), 1, "dark", "off", "wide"),
         ("portrait-800x1280-touch", (800, 1280), 1, "light", "on", "narrow"),
         ("1280x800-touch", (1280, 800), 1, "dark", "on", "wide")]

BOOK_SIZES = ("portrait-800x1280", "1280x800")   # the Book dialog too (a book rendered in it)
# the Voices page with a described library and the Blind test dialog, light and dark
LISTENING_SIZES = ("portrait-800x1280", "1280x800", "portrait-800x1280-dark", "1280x800-dark")


class Xvfb:
    """An X server of one screen size, on a display number it picks itself (-displayfd)."""

    def __init__(self, width: int, height: int):
        read, write = os.pipe()
        self.proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", f"{width}x{height}x24",
                                      "-nolisten", "tcp"], pass_fds=(write,), stderr=subprocess.DEVNULL)
        os.close(write)
        with os.fdopen(read) as f:
            self.display = ":" + f.readline().strip()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def xvfb_present():
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (scripts/setup.sh --test installs it)")


@pytest.mark.parametrize("name,screen,scale,theme,touch,arrangement", SIZES, ids=[s[0] for s in SIZES])
def test_nothing_is_cut_at_any_size(xvfb_present, name, screen, scale, theme, touch, arrangement, report):
    server = Xvfb(*screen)
    try:
        env = {**os.environ, "DISPLAY": server.display, "QT_QPA_PLATFORM": "xcb", "QT_SCALE_FACTOR": str(scale)}
        book = ["--book"] if name in BOOK_SIZES else []
        listening = ["--listening"] if name in LISTENING_SIZES else []
        done = subprocess.run([sys.executable, str(RUNNER), str(ARTIFACTS), f"workbench-{name}", "--theme", theme,
                               "--touch", touch, *book, *listening],
                              env=env, capture_output=True, text=True, timeout=300)
    finally:
        server.close()
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(lines[-1])
    logical = (screen[0] // scale, screen[1] // scale)
    assert result["screen"] == list(logical) and result["dpr"] == scale
    assert result["arrangement"] == arrangement
    assert result["minimum"][0] <= logical[0] and result["minimum"][1] <= logical[1], result["minimum"]
    problems = [f"{page}: {p}" for page, found in result["problems"].items() for p in found]
    assert not problems, "\n".join(problems)
    for shot in result["screenshots"]:
        assert Path(shot).stat().st_size > 20_000
        image = QImage(shot)   # drawn at the screen's own pixels: sharp on HiDPI
        if shot.endswith(("-book.png", "-blind-test.png")):   # (a dialog: within the screen)
            assert image.width() <= screen[0] and image.height() <= screen[1], shot
            continue
        assert (image.width(), image.height()) == screen, (shot, image.width(), image.height())
    assert (name in BOOK_SIZES) == any(s.endswith("-book.png") for s in result["screenshots"])
    assert (name in LISTENING_SIZES) == any(s.endswith("-blind-test.png") for s in result["screenshots"])
    report(f"workbench {name}: {result['arrangement']}, window {result['window']}, minimum {result['minimum']}, "
           f"nothing cut on any page")
