"""What the workbench's tests share: a window on the demo model with its own settings and data
folder, a take generated and waited for, screenshots, a stream paced to real time, and the ALSA
capture device that records what the window plays."""
from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QObject, QPoint, QSettings, Slot
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from kazeia.app.audio_output import AudioOutput
from kazeia.app.main_window import MainWindow
from kazeia.app.takes import TakeStore

ARTIFACTS = Path(__file__).parents[1] / "artifacts"
TIMEOUT_MS = 120_000
# a take on an accelerator: a first run on lavapipe compiles ggml's pipelines with LLVM (minutes on a
# new machine, whose shader cache is empty; then cached on disk)
ACCEL_TIMEOUT_MS = 800_000
ALL_CPU = dict.fromkeys(("talker", "code_predictor", "decoder"), "cpu")
ALL_SCHED = dict.fromkeys(("talker", "code_predictor", "decoder"), "accel-sched")


class JobProgress(QObject):
    """Calls `on_progress(item)` for what every job of `kind` reports while it runs (chunks of a take,
    a load's conversion progress), on the GUI thread, after the window's own handler."""

    def __init__(self, controller, kind: str, on_progress):
        super().__init__()
        self.kind, self.on_progress = kind, on_progress
        self.jobs: list = []
        controller.submitted.connect(self._submitted)

    @Slot(object)
    def _submitted(self, job) -> None:
        if job.kind == self.kind:
            self.jobs.append(job)
            job.progress.connect(self._progress)

    @Slot(object)
    def _progress(self, item) -> None:
        self.on_progress(item)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAZEIA_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def make_window(qtbot, workdir, audio=None, model=None) -> MainWindow:
    settings = QSettings(str(workdir / "settings.ini"), QSettings.IniFormat)
    if settings.value("view/touch") is None:   # (once a test made a touch screen, "auto" would find it)
        settings.setValue("view/touch", "off")
    window = MainWindow(model, settings=settings, audio=audio or AudioOutput(), store=TakeStore(workdir / "data"))
    qtbot.addWidget(window)
    window.resize(1280, 800)
    window.show()
    qtbot.waitUntil(lambda: window.info is not None, timeout=TIMEOUT_MS)
    return window


@pytest.fixture
def window(qtbot, workdir):
    w = make_window(qtbot, workdir)
    yield w
    w.controller.cancel()
    w.controller.shutdown()


@pytest.fixture
def accel_window(qtbot, workdir, converted):
    """The window on the tiny CustomVoice checkpoint's f32 conversion, the model every `accel` test
    runs: on lavapipe each weight type is pipelines of its own to compile (minutes each on a new
    machine), and the Vulkan pass warms this one model's (scripts/test.sh), not the demo's q8_0/f16."""
    w = make_window(qtbot, workdir, model=str(converted("custom_voice", "f32")))
    yield w
    w.controller.cancel()
    w.controller.shutdown()


def generate(qtbot, window, frames=8, seed=0, text=None, timeout_ms=TIMEOUT_MS):
    """A take from the panels, waited for; an error shown before it ends stops the wait at once with
    its message (not after the timeout)."""
    window.sampling.max_frames.setValue(frames)
    window.sampling.seed.setValue(seed)
    if text:
        window.text.setPlainText(text)
    outcome = {}
    done = Outcome(outcome)
    window.presenter.core.take_finished.connect(done.finished)
    window.error_shown.connect(done.failed)
    try:
        assert window.presenter.core.generate()
        qtbot.waitUntil(lambda: bool(outcome), timeout=timeout_ms)
    finally:
        window.presenter.core.take_finished.disconnect(done.finished)
        window.error_shown.disconnect(done.failed)
    assert "result" in outcome, f"the take failed: {outcome['error']}"
    return outcome["result"]


class Outcome(QObject):
    """Records what ended a take (its result or the error the window showed), on the GUI thread."""

    def __init__(self, into: dict):
        super().__init__()
        self.into = into

    @Slot(object)
    def finished(self, result) -> None:
        self.into["result"] = result

    @Slot(str)
    def failed(self, message: str) -> None:
        self.into.setdefault("error", message)


def screenshot(window, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    window.grab().save(str(path))
    assert path.stat().st_size > 10_000
    return path


class RealTimePacedStream:
    """The engine's stream handed on at real-time pace (80 ms of audio per 80 ms, or `speed` times
    faster): the GUI then sees a 30 s take as it would from an engine running at real time, not 20x
    faster as the demo does."""

    def __init__(self, stream, speed: float = 1.0):
        self._stream, self._start, self._speed = stream, time.perf_counter(), speed

    def __iter__(self):
        for chunk in self._stream:
            due = self._start + (chunk.first_frame + chunk.frames) * chunk.timings.frame_seconds / self._speed
            time.sleep(max(0.0, due - time.perf_counter()))
            yield chunk

    def __getattr__(self, name):   # result, cancel, ...
        return getattr(self._stream, name)


def capture_device(audio: AudioOutput):
    return next((i for i, name in audio.devices() if "kazeia_capture" in name or "Kazeia test capture" in name), None)


def captured_audio() -> np.ndarray:
    path = Path(os.environ["KAZEIA_CAPTURE_OUT"])
    if not path.exists():   # nothing played yet in this session
        return np.zeros(0, np.float32)
    captured = np.fromfile(path, dtype=np.float32)
    return captured[captured != 0]   # the device plays silence while it waits for samples


def capture_window(qtbot, workdir):
    audio = AudioOutput()
    device = capture_device(audio)
    if device is None:
        pytest.skip(f"no ALSA capture device ({audio.reason or 'PortAudio lists none'})")
    w = make_window(qtbot, workdir, audio=audio)
    w.backend.volume.setValue(100)
    audio.set_device(device)
    return w, audio




_DEVICE = None


def finger():
    global _DEVICE
    if _DEVICE is None:   # one touch screen for the session (Qt keeps every device registered)
        _DEVICE = QTest.createTouchDevice()
    return _DEVICE


def tap(widget, pos: QPoint | None = None, hold_ms: int = 0) -> None:
    """A finger down and up on `widget` (its centre unless `pos`), held `hold_ms`."""
    window = widget.window()
    at = widget.mapTo(window, pos if pos is not None else widget.rect().center())
    QTest.touchEvent(window, finger()).press(0, at, window).commit()
    if hold_ms:
        QTest.qWait(hold_ms)
    QTest.touchEvent(window, finger()).release(0, at, window).commit()
    QApplication.processEvents()
