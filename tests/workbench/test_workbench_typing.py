"""Speak as I type: keys typed into the text box while the take speaks, the whole text's take, whose audio is
the whole text's given at once with streaming text, bit for bit; the take keeps what was typed."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
from PySide6.QtTest import QTest  # noqa: E402

from kazeia.engine import Engine, Request, SamplingParams  # noqa: E402
from kazeia.engine.synthesis.requests import ONE_PROMPT  # noqa: E402
from support.workbench import TIMEOUT_MS, Outcome  # noqa: E402
from support.workbench import window, workdir  # noqa: E402,F401 (fixtures)

TYPED = "Typed while it speaks, one word after another."


def test_speak_as_i_type_is_one_utterance_of_the_typed_text(qtbot, window):
    window.sampling.max_frames.setValue(40)
    window.sampling.seed.setValue(5)
    window.text.setPlainText("")
    outcome = {}
    done = Outcome(outcome)
    window.presenter.core.take_finished.connect(done.finished)
    window.error_shown.connect(done.failed)
    button = window.transport.type_button
    button.click()
    assert button.isChecked() and window.stop_button.isEnabled()
    for word in TYPED.split(" "):   # (a person typing: keys, pauses between words)
        QTest.keyClicks(window.text, word if word == TYPED.split(" ")[0] else " " + word)
        qtbot.wait(30)
    cursor = window.text.textCursor()
    cursor.movePosition(cursor.MoveOperation.Start)
    window.text.setTextCursor(cursor)
    QTest.keyClicks(window.text, "X")   # an edit before the end: not heard, and said so
    assert "only text added at the end" in window.statusBar().currentMessage()
    button.click()   # finished: the rest is spoken
    assert not button.isChecked()
    qtbot.waitUntil(lambda: bool(outcome), timeout=TIMEOUT_MS)
    assert "result" in outcome, outcome.get("error")
    take = window.store.takes[-1]
    assert take.text == TYPED and take.request["streaming_text"] is True
    engine = Engine.load(window.info.path, threads=2)
    sampling = SamplingParams(**take.sampling)
    whole = engine.open_take(Request(TYPED, speaker=take.request["speaker"], language=take.request["language"],
                                     sampling=sampling, streaming_text=True, plan=ONE_PROMPT))
    expected = np.concatenate([c.audio for c in whole])
    assert np.array_equal(outcome["result"].audio, expected)
    assert np.array_equal(take.audio, expected)


def test_nothing_typed_is_refused_without_a_take(qtbot, window):
    window.text.setPlainText("")
    outcome = {}
    done = Outcome(outcome)
    window.error_shown.connect(done.failed)
    window.transport.type_button.click()
    window.transport.type_button.click()
    qtbot.waitUntil(lambda: bool(outcome), timeout=TIMEOUT_MS)
    assert "empty" in outcome["error"] or "nothing" in outcome["error"]
    assert window.store.takes == [] and window.generate_button.isEnabled()
