"""A long text in the workbench: markup and paragraphs make a take of several chunks, streamed and
played as one, kept with its chunks (text, seed, place in the audio); bad markup is a message that
names its line and column, and the window stays ready."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PySide6")
from support.workbench import generate, window, workdir  # noqa: E402,F401 (fixtures)

LONG = "The first sentence is here.\n\nA second paragraph. [pause:300ms] And its last word."


def test_a_long_text_is_one_take_of_several_chunks(qtbot, window):
    result = generate(qtbot, window, frames=4, seed=3, text=LONG)
    take = window.store.takes[-1]
    assert [c["written"] for c in take.chunks] == ["The first sentence is here.", "A second paragraph.",
                                                   "And its last word."]
    assert take.chunks[0]["seed"] == 3 and len({c["seed"] for c in take.chunks}) == 3
    # three chunks of 4 frames, a paragraph's 600 ms and the marked 300 ms between them
    assert len(result.audio) == 3 * 4 * 1920 + int(0.6 * 24000) + int(0.3 * 24000)
    assert take.timings["frames"] == 12 and len(take.frame_ms["talker"]) == 12
    spans = [c["span"] for c in take.chunks]
    assert spans[0][0] == 0 and spans[-1][1] == len(result.audio)
    # the chunks survive a restart of the store (the take index keeps them)
    from kazeia.app.takes import TakeStore
    again = TakeStore(window.store.folder.parent)
    assert [c["text"] for c in again.takes[-1].chunks] == [c["text"] for c in take.chunks]
    # exported, a long take comes with its subtitles: a cue per chunk where it lies in the take
    from kazeia.app.export import export_take
    (window.store.folder.parent / "out").mkdir()
    path = export_take(take, result.audio, window.store.folder.parent / "out" / "long.wav")
    cues = path.with_suffix(".srt").read_text().split("\n\n")
    assert [c.splitlines()[2] for c in cues] == [c["written"] for c in take.chunks]
    ms = round(spans[1][0] / 24)
    assert cues[1].splitlines()[1].startswith(f"00:00:{ms // 1000:02d},{ms % 1000:03d} --> ")
    assert path.with_suffix(".vtt").read_text().startswith("WEBVTT")


def test_bad_markup_is_a_message_with_its_position(qtbot, window):
    errors = []
    window.error_shown.connect(errors.append)
    window.text.setPlainText("Fine.\nThen [pause:forever] here.")
    window.sampling.max_frames.setValue(3)
    assert window.presenter.core.generate()
    qtbot.waitUntil(lambda: bool(errors), timeout=30_000)
    assert "line 2, column 6" in errors[0] and "duration" in errors[0]
    qtbot.waitUntil(lambda: window.generate_button.isEnabled(), timeout=10_000)
    result = generate(qtbot, window, frames=3, text="Now it is fine.")   # the window is ready again
    assert len(result.audio) == 3 * 1920 and np.isfinite(result.audio).all()


def test_the_text_box_shows_markup_and_its_first_error(qtbot, window):
    plan = window.text_plan
    window.text.setPlainText("vivian: Hello there. [pause:300ms] Fine.\n\nA new paragraph.")
    assert plan.check() == "about 3 chunks, 2 pauses, voices: vivian"
    window.text.setPlainText("Fine.\nThen [pause:forever] here.")
    line = plan.check()
    assert line.startswith("line 2, column 6:") and "duration" in line
    assert plan.highlighter.error_at == (2, 6) and plan.property("error")
    window.text.setPlainText("Just one sentence.")   # one plain chunk: nothing to say
    assert plan.check() == "" and plan.highlighter.error_at is None
    # the check also runs by itself a moment after typing stops
    with qtbot.waitSignal(plan.checked, timeout=3000) as signal:
        window.text.setPlainText("Bad [tag] here.")
    assert signal.args[0].startswith("line 1, column 5: unknown tag")


def test_one_chunk_made_again_changes_that_chunk_only(qtbot, window):
    from support.workbench import Outcome
    first = generate(qtbot, window, frames=4, seed=5, text=LONG)
    old = window.store.takes[-1]
    outcome = {}
    done = Outcome(outcome)
    window.presenter.core.take_finished.connect(done.finished)
    window.error_shown.connect(done.failed)
    assert window.presenter.takes.redo_chunk(old, 1, seed=4242)
    qtbot.waitUntil(lambda: bool(outcome), timeout=60_000)
    assert "result" in outcome, outcome
    new = window.store.takes[-1]
    assert new is not old and new.request["chunk_seeds"] == {"1": 4242}
    assert [c["seed"] for c in new.chunks] == [old.chunks[0]["seed"], 4242, old.chunks[2]["seed"]]
    a, b = first.audio, outcome["result"].audio
    assert len(a) == len(b)
    (s0, e0), (s1, e1), (s2, e2) = (c["span"] for c in old.chunks)
    np.testing.assert_array_equal(a[:e0], b[:e0])          # the first chunk: as it was
    np.testing.assert_array_equal(a[s2:], b[s2:])          # chunk 3: as it was
    assert not np.array_equal(a[s1:e1], b[s1:e1])          # chunk 2: new
    assert "chunk 2 (" in __import__("kazeia.app.panels.takes", fromlist=["take_details"]).take_details(new)


def test_pronunciation_rules_are_edited_checked_kept_and_used(qtbot, window):
    panel = window.pronunciation
    panel.add_rule("Kazeia", "ka-ZAY-ah")
    assert panel.lexicon is not None and len(panel.lexicon) == 1 and "1 rule" in panel.note.text()
    saved = (window.store.folder.parent / "pronunciation.csv").read_text()
    assert "Kazeia,ka-ZAY-ah" in saved
    panel.add_rule("", "nothing to say for")   # a bad rule: named, and the last good set stays in use
    assert "empty" in panel.note.text().lower() or "term" in panel.note.text()
    assert len(panel.lexicon) == 1
    panel.table.selectRow(1)
    panel.remove_selected()
    assert "1 rule" in panel.note.text()
    result = generate(qtbot, window, frames=3, seed=2, text="Kazeia speaks.")
    take = window.store.takes[-1]
    assert take.chunks[0]["text"] == "ka-ZAY-ah speaks." and take.chunks[0]["rewrites"][0][:2] == ["Kazeia", "ka-ZAY-ah"]
    from kazeia.engine import Request, SamplingParams
    direct = window.controller.engine.take(Request("ka-ZAY-ah speaks.", speaker=take.request["speaker"],
                                                   sampling=SamplingParams(**take.sampling)))
    np.testing.assert_array_equal(result.audio, direct.audio)


def test_the_rules_open_from_the_voices_menu(qtbot, window):
    action = next(a for m in window.menuBar().findChildren(__import__("PySide6.QtWidgets", fromlist=["QMenu"]).QMenu)
                  for a in m.actions() if a.text() == "Pronunciation rules...")
    action.trigger()
    assert window.pronunciation_dialog.isVisible() and window.pronunciation.isVisible()
    window.pronunciation_dialog.close()


def test_the_text_box_shows_where_each_chunk_begins(qtbot, window):
    plan = window.text_plan
    sentence = "This sentence is long enough that a few of them make more than one chunk of text."
    text = f"{sentence}\n{sentence}\n\\[An aside\\] {sentence} [pause:200ms] The end."
    window.text.setPlainText(text)
    assert plan.check().startswith("about 3 chunks")
    spans = plan.highlighter.chunks
    assert len(spans) == 3 and all(spans)
    assert text[spans[0][0]:spans[0][1]] == f"{sentence}\n{sentence}"
    assert text[spans[1][0]:spans[1][1]] == f"\\[An aside\\] {sentence}"
    assert text[spans[2][0]:spans[2][1]] == "The end."

    def tinted(offset: int) -> bool:   # the char's background as the highlighter laid it out
        block = window.text.document().findBlock(offset)
        inside = offset - block.position()
        return any(r.start <= inside < r.start + r.length and r.format.background().style() != 0
                   for r in block.layout().formats())
    first, second, third = spans
    assert not tinted(first[0]) and not tinted(first[1] - 1)
    assert tinted(second[0]) and tinted(second[1] - 1)   # (the escape's muted colour keeps the tint)
    assert not tinted(third[0])
    window.text.setPlainText("Just one sentence.")   # one chunk: no tint at all
    plan.check()
    assert plan.highlighter.chunks == [(0, 18)] and not tinted(0)
