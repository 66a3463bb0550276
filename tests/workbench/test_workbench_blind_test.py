"""The Blind test dialog: a whole ABX run by keys and one by finger, on two takes heard through the ALSA
capture device. During the trials nothing on screen names a take (the dialog's texts, tooltips and
title; the rest of the window does not change with what plays); X is the sound the test says; the
result is saved beside the takes, read back and exported."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QAbstractButton, QApplication, QLabel, QListWidget, QWidget  # noqa: E402

from kazeia.engine.takes.blind_test import saved_tests, trial_order  # noqa: E402
from support.workbench import capture_window, captured_audio, generate, screenshot, tap  # noqa: E402
from support.workbench import workdir  # noqa: E402,F401 (fixtures)

NAMES = ("SECRET-ALPHA", "SECRET-BETA")


def texts(root: QWidget, leave_out: QWidget | None = None) -> list[str]:
    """Everything `root` shows or tells about itself and its visible children (but `leave_out` and
    its own): texts, titles, tooltips."""
    out = [root.windowTitle()]
    for w in [root, *root.findChildren(QWidget)]:
        if not w.isVisible() or (leave_out is not None and (w is leave_out or leave_out.isAncestorOf(w))):
            continue
        out += [w.toolTip(), w.statusTip(), w.whatsThis(), w.accessibleName(), w.accessibleDescription()]
        if isinstance(w, (QLabel, QAbstractButton)):
            out.append(w.text())
        if isinstance(w, QListWidget):
            out += [w.item(i).text() for i in range(w.count())]
    return [t for t in out if t]


def two_named_takes(qtbot, w):
    for seed, name in zip((1, 2), NAMES):
        generate(qtbot, w, frames=24, seed=seed)
        w.store.rename(w.store.takes[-1], name)
    w.takes.refresh()
    w.takes.table.selectAll()
    return w.store.takes[-2:]


def open_dialog(qtbot, w, kind: str = "abx", trials: int = 6):
    dialog = w.presenter.takes.start_blind_test()
    assert dialog is not None
    qtbot.waitExposed(dialog)
    dialog.activateWindow()
    qtbot.waitActive(dialog)
    dialog.kind.setCurrentIndex(dialog.kind.findData(kind))
    dialog.trials.setValue(trials)
    return dialog


def hidden_everywhere(dialog, window, outside: list[str]) -> None:
    shown = " | ".join(texts(dialog))
    for take in dialog.takes:
        for secret in (take.label, take.id):
            assert secret not in shown, f"{secret!r} shown during the trials: {shown}"
    assert texts(window, dialog) == outside, "the window changed with what the blind test played"


def test_abx_by_keys_hides_the_takes_plays_x_and_keeps_the_result(qtbot, workdir, tmp_path):
    w, audio = capture_window(qtbot, workdir)
    w.takes.match_loudness.setChecked(False)   # (X is then found bit for bit among the captured samples)
    takes = two_named_takes(qtbot, w)
    dialog = open_dialog(qtbot, w, trials=6)
    test = dialog.start(seed=1234)
    assert [test.sound("X") for _ in range(1)] == trial_order(6, 1234)[:1]
    a_take = next(t for t in takes if t.id == test.a["take"])
    outside = texts(w, dialog)
    assert "trial 1 of 6" in dialog.windowTitle()
    screenshot(dialog, "workbench-blind-test-trial")
    hidden_everywhere(dialog, w, outside)
    # trial 1 by keys: X heard on the device is the take the test hides behind it
    expected = dialog.audio[test.sound("X")]
    expected = expected[expected != 0][:960]
    QTest.keyClick(dialog, Qt.Key_Home)
    QTest.keyClick(dialog, Qt.Key_X)
    assert audio.playing
    qtbot.waitUntil(lambda: len(captured_audio()) and any(
        np.array_equal(captured_audio()[i:i + 960], expected) for i in np.flatnonzero(captured_audio() == expected[0])),
        timeout=20_000)
    hidden_everywhere(dialog, w, outside)
    for key in (Qt.Key_A, Qt.Key_B, Qt.Key_Space):
        QTest.keyClick(dialog, key)
        hidden_everywhere(dialog, w, outside)
    right = {"A": Qt.Key_Left, "B": Qt.Key_Right}
    wrong = {"A": Qt.Key_Right, "B": Qt.Key_Left}
    for i in range(6):   # five right, one wrong
        assert f"Trial {i + 1} of 6" in dialog.trial_label.text()
        QTest.keyClick(dialog, (wrong if i == 3 else right)[test.order[i]])
        if i < 5:
            hidden_everywhere(dialog, w, outside)
    assert test.finished and test.correct == 5
    assert dialog.verdict.text() == "5 of 6: not shown to differ, p = 0.11"
    assert f"A was {a_take.label}" in dialog.reveal.text()   # named once the test is over
    screenshot(dialog, "workbench-blind-test-result")
    # kept beside the takes, read back, exported
    back = saved_tests(w.store.folder)
    assert [t.id for t in back] == [test.id] and back[0].answers == test.answers and back[0].seed == 1234
    csv = dialog.export("csv", str(tmp_path / "r.csv")).read_text().splitlines()
    assert csv[1] == "trial,x_was,answer,correct" and sum(line.endswith(",1") for line in csv[2:]) == 5
    data = json.loads(dialog.export("json", str(tmp_path / "r.json")).read_text())
    assert data["result"]["correct"] == 5 and data["a"]["take"] == test.a["take"]
    dialog.close_button.click()
    assert not audio.playing
    w.controller.shutdown()


def test_abx_and_preference_by_finger(qtbot, workdir):
    w, audio = capture_window(qtbot, workdir)
    w.set_touch("on")
    two_named_takes(qtbot, w)
    dialog = open_dialog(qtbot, w, trials=4)
    tap(dialog.start_button)
    test = dialog.test
    assert test is not None and dialog.stack.currentIndex() == 1
    for button in (*dialog.answer_buttons.values(), dialog.play_buttons["X"]):
        assert button.height() >= 88 and button.width() >= 176   # a finger's target, twice over
    outside = texts(w, dialog)
    for i in range(4):
        tap(dialog.play_buttons["X"])
        assert audio.playing
        hidden_everywhere(dialog, w, outside)
        tap(dialog.answer_buttons["left" if test.order[i] == "A" else "right"])
    assert test.finished and test.correct == 4 and dialog.stack.currentIndex() == 2
    # the blind preference test: two sounds a trial, in a drawn order
    tap(dialog.again_button)
    dialog.kind.setCurrentIndex(dialog.kind.findData("preference"))
    tap(dialog.start_button)
    pref = dialog.test
    assert pref.kind == "preference" and not dialog.play_buttons["X"].isVisible()
    for i in range(4):
        tap(dialog.play_buttons["1"])
        hidden_everywhere(dialog, w, outside)
        # the listener always prefers the same take, whichever place it plays in
        tap(dialog.answer_buttons["left" if pref.sound("1") == "A" else "right"])
    assert pref.finished and pref.preferred_a == 4 and pref.verdict.startswith("A preferred 4 of 4")
    assert len(saved_tests(w.store.folder)) == 2 and dialog.history.count() == 2
    dialog.close()
    w.controller.shutdown()


def test_a_blind_test_needs_two_takes(qtbot, workdir):
    w, _ = capture_window(qtbot, workdir)
    generate(qtbot, w, frames=4, seed=1)
    w.takes.table.selectAll()
    assert w.presenter.takes.start_blind_test() is None
    assert "exactly two takes" in w.statusBar().currentMessage()
    QApplication.processEvents()
    w.controller.shutdown()
