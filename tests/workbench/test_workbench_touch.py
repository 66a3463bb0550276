"""The workbench by finger: synthetic touch sequences (QTest, a touch screen device) through
generate, stop, play, A/B, export, voice creation and a take's long-press actions; hit targets for a
finger, drag scrolling, "?" for what tooltips say, and the on-screen keyboard kept off the text."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile

pytest.importorskip("PySide6")
from PySide6.QtCore import QPoint, QRectF  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import (QAbstractButton, QApplication, QComboBox, QFileDialog, QInputDialog,  # noqa: E402
                               QMenu, QMessageBox, QScroller, QTabBar, QWhatsThis)

from kazeia.app.takes import Take  # noqa: E402
from kazeia.app.touch import HIT_TARGET, LONG_PRESS_MS  # noqa: E402
from support.workbench import (ALL_CPU, TIMEOUT_MS, RealTimePacedStream, capture_window, finger,  # noqa: E402
                               generate, make_window, screenshot, tap)
from support.workbench import workdir  # noqa: E402,F401 (fixtures)

def drag(widget, start: QPoint, end: QPoint, steps: int = 12) -> None:
    window = widget.window()
    a, b = widget.mapTo(window, start), widget.mapTo(window, end)
    QTest.touchEvent(window, finger()).press(0, a, window).commit()
    for i in range(1, steps + 1):
        QTest.qWait(16)
        p = a + (b - a) * i / steps
        QTest.touchEvent(window, finger()).move(0, p, window).commit()
    QTest.touchEvent(window, finger()).release(0, b, window).commit()


@pytest.fixture
def touch_window(qtbot, workdir):
    w = make_window(qtbot, workdir)
    w.set_touch("on")
    qtbot.wait(50)
    yield w
    w.controller.cancel()
    w.controller.shutdown()


def add_takes(window, n: int) -> None:
    for i in range(n):
        window.store.add(Take(id=f"t{i:02d}", created=1000.0 + i, text=f"take {i}", model=str(window.info.path),
                              request={"speaker": "x"}, sampling={"seed": i}, placement=ALL_CPU, threads=1,
                              timings={"frames": 10, "rtf": 0.5, "frame_seconds": 0.08}, stop_reason="eos",
                              sample_rate=24000, audio=np.full(19200, 0.01 * (i + 1), np.float32)))
    window.takes.refresh()


def test_touch_mode_sizes_every_target_for_a_finger(qtbot, touch_window):
    w = touch_window
    add_takes(w, 3)
    assert w.touch
    small = [f"{type(x).__name__} {getattr(x, 'text', lambda: '')()!r} {x.height()} px"
             for x in w.findChildren(QAbstractButton) + w.findChildren(QComboBox)
             if x.isVisible() and x.height() < HIT_TARGET and not isinstance(x.parent(), QTabBar)]
    assert not small, small
    rows = w.takes.table.verticalHeader()
    assert rows.sectionSize(0) >= HIT_TARGET
    for bar in w.findChildren(QTabBar):
        if bar.isVisible():
            assert all(bar.tabRect(i).height() >= HIT_TARGET for i in range(bar.count()))
    screenshot(w, "workbench-touch")
    w.set_touch("off")
    assert not w.touch
    qtbot.waitUntil(lambda: w.transport.generate_button.height() < HIT_TARGET, timeout=2000)


def test_generate_and_stop_by_finger(qtbot, touch_window, monkeypatch):
    w = touch_window
    w.sampling.max_frames.setValue(6)
    with qtbot.waitSignal(w.presenter.core.take_finished, timeout=TIMEOUT_MS):
        tap(w.transport.generate_button)
    assert len(w.store.takes) == 1
    # a long take at real-time pace, stopped by a tap
    original = type(w.controller.engine).open_take
    monkeypatch.setattr(type(w.controller.engine), "open_take",
                        lambda self, *a, **k: RealTimePacedStream(original(self, *a, **k)))
    w.sampling.max_frames.setValue(400)
    w.sampling.greedy.setChecked(True)   # (greedy: the demo model runs to the limit)
    tap(w.transport.generate_button)
    qtbot.waitUntil(lambda: w.stop_button.isEnabled() and w.latency.chart.frames > 0, timeout=TIMEOUT_MS)
    with qtbot.waitSignal(w.presenter.core.take_finished, timeout=TIMEOUT_MS) as blocker:
        tap(w.transport.stop_button)
    assert blocker.args[0].stop_reason == "cancelled"


def test_a_tap_plays_a_take_and_a_long_press_opens_its_actions(qtbot, workdir, monkeypatch):
    w, audio = capture_window(qtbot, workdir)
    w.set_touch("on")
    generate(qtbot, w, frames=20, seed=1)
    generate(qtbot, w, frames=20, seed=2)
    table = w.takes.table
    w.workspace.show_page(w.takes)
    qtbot.wait(50)
    row1 = table.visualRect(w.takes.proxy.index(1, 0)).center()
    tap(table.viewport(), row1)
    assert w.playback.playing is not None and w.playback.playing is w.takes.current()
    tapped = w.playback.playing
    tap(w.transport.play_button)   # the transport's play stops it
    assert not audio.playing
    # a long press: the take's actions, acting on that take
    row0 = table.visualRect(w.takes.proxy.index(0, 0)).center()
    tap(table.viewport(), row0, hold_ms=LONG_PRESS_MS + 200)
    menu = next(m for m in QApplication.topLevelWidgets() if isinstance(m, QMenu) and m.objectName() == "take_actions"
                and m.isVisible())
    texts = [a.text() for a in menu.actions()]
    assert texts == ["Play", "A/B the two selected", "Blind test the two selected...", "Restore settings",
                     "Keep this voice...", "Make a chunk again (new seed)...", "Rename...", "Export...", "Delete..."]
    assert not menu.actions()[5].isEnabled()   # (a one-prompt take has no chunks)
    assert w.takes.current() is not tapped
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("renamed by finger", True))
    next(a for a in menu.actions() if a.text() == "Rename...").trigger()
    menu.close()
    assert w.takes.current().name == "renamed by finger"
    w.playback.stop()
    w.controller.shutdown()


def test_ab_by_finger_switches_at_the_same_position(qtbot, workdir):
    w, audio = capture_window(qtbot, workdir)
    w.set_touch("on")
    generate(qtbot, w, frames=40, seed=1)
    generate(qtbot, w, frames=40, seed=2)
    w.takes.table.selectAll()
    tap(w.transport.ab_button)
    first = w.playback.playing
    assert first is not None and w.session.ab_pair is not None
    qtbot.wait(200)
    tap(w.transport.ab_button)   # while the pair plays: switch
    assert w.playback.playing is not first and w.playback.playing in w.session.ab_pair and audio.position > 0
    w.playback.stop()
    w.controller.shutdown()


def test_export_by_finger(qtbot, touch_window, workdir, monkeypatch):
    w = touch_window
    generate(qtbot, w, frames=4, text="Exported by finger.")
    w.workspace.show_page(w.takes)
    w.takes.table.selectAll()
    out = workdir / "exported"
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", lambda *a, **k: str(out))
    tap(w.takes.export_button)
    files = sorted(out.glob("*.wav"))
    assert len(files) == 1
    audio, sr = soundfile.read(files[0], dtype="float32")
    assert sr == 24000 and np.array_equal(audio, w.store.audio(w.store.takes[0]))


def test_a_voice_made_by_finger(qtbot, workdir, converted, monkeypatch):
    from support.goldens import GOLDEN
    ref = np.load(GOLDEN / "base_xvec_stream.npz")["ref_wav"]
    audio_path = workdir / "finger voice.wav"
    soundfile.write(audio_path, ref, 24000)
    w = make_window(qtbot, workdir, model=str(converted("base")))
    w.set_touch("on")
    w.workspace.show_page(w.library)
    qtbot.wait(50)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(audio_path), ""))
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("", False))
    with qtbot.waitSignal(w.presenter.voices.voice_created, timeout=TIMEOUT_MS):
        tap(w.library.new_button)
    assert w.voices.names() == ["finger voice"] and w.voice.profile.currentText() == "finger voice"
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.Yes)
    w.library.table.selectRow(0)
    tap(w.library.delete_button)
    assert w.voices.names() == []
    w.controller.shutdown()


def test_tables_scroll_by_dragging(qtbot, touch_window):
    w = touch_window
    add_takes(w, 40)
    w.workspace.show_page(w.takes)
    qtbot.wait(50)
    table = w.takes.table
    assert QScroller.hasScroller(table.viewport()) and QScroller.hasScroller(w.text.viewport())
    bar = table.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0
    viewport = table.viewport()
    drag(viewport, QPoint(viewport.width() // 2, viewport.height() - 10), QPoint(viewport.width() // 2, 10))
    qtbot.waitUntil(lambda: bar.value() > 0, timeout=3000)
    assert w.playback.playing is None   # a drag is not a tap


def test_what_the_tooltips_say_is_a_tap_away(qtbot, touch_window):
    w = touch_window
    target = w.backend.volume
    assert target.whatsThis() == target.toolTip() != ""
    volume = target.value()
    tap(w.transport.help_button)
    assert w.transport.help.active
    with qtbot.waitSignal(w.transport.help.shown, timeout=3000) as blocker:
        tap(target, QPoint(2, target.height() // 2))   # (a tap there would otherwise move the slider)
    assert blocker.args[0] == target.toolTip() and not w.transport.help.active
    assert any(t.isVisible() and t.metaObject().className() == "QWhatsThat" for t in QApplication.topLevelWidgets())
    assert target.value() == volume   # the tap only asked what the slider is
    QWhatsThis.hideText()


def test_the_on_screen_keyboard_does_not_cover_the_text(qtbot, touch_window):
    w = touch_window
    w.resize(800, 1200)   # a portrait tablet: the narrow pages
    qtbot.waitUntil(lambda: w.workspace.arrangement == "narrow")
    w.workspace.show_page(w.compose)
    w.text.setPlainText("\n".join(f"line {i}" for i in range(60)))
    w.text.setFocus()
    cursor = w.text.textCursor()
    cursor.movePosition(cursor.MoveOperation.End)
    w.text.setTextCursor(cursor)
    keyboard = QRectF(0, w.height() - 420, w.width(), 420)   # where a tablet's keyboard rises
    assert w.avoid_keyboard(keyboard) == 420
    qtbot.wait(50)
    caret = w.text.viewport().mapTo(w, w.text.cursorRect().bottomLeft())
    assert 0 < caret.y() < w.height() - 420
    assert w.avoid_keyboard(QRectF()) == 0   # the keyboard went away: the room comes back
