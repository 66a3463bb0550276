"""The Book dialog: a book opened (chapters read and skipped), rendered on the worker in the window's
voice with per-chapter progress, a chunk played and made again alone, the finished files in the
folder; what is done shows again in a new window (the folder is the state); takes refused meanwhile."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

pytest.importorskip("PySide6")

from support.books import make_epub  # noqa: E402
from support.workbench import TIMEOUT_MS, JobProgress, make_window, screenshot  # noqa: E402
from support.workbench import window, workdir  # noqa: E402,F401 (fixtures)


def _render(qtbot, window, click) -> object:
    with qtbot.waitSignal(window.presenter.render.book_finished, timeout=TIMEOUT_MS) as done:
        click()
    assert not isinstance(done.args[0], str), done.args[0]
    qtbot.wait(20)
    return done.args[0]


def test_a_book_rendered_from_the_dialog(qtbot, window, workdir):
    window.sampling.max_frames.setValue(6)
    window.sampling.seed.setValue(3)
    window.voice.speaker.setCurrentText("serena")
    panel = window.book
    window.book_dialog.show()
    assert panel.open_book(str(make_epub(workdir / "b.epub")))
    titles = [panel.chapters.item(r, 1).text() for r in range(panel.chapters.rowCount())]
    assert "Chapter One" in titles and "Chapter Two" in titles
    statuses = [panel.chapters.item(r, 5).text() for r in range(panel.chapters.rowCount())]
    assert any(s.startswith("skipped: marked titlepage") for s in statuses)
    out = Path(panel.out_dir.text())
    seen = []
    watch = JobProgress(window.controller, "book", seen.append)
    core = window.presenter.core
    result = _render(qtbot, window, lambda: (panel.render_button.click(),
                                             core.generate() and pytest.fail("a take ran beside the book")))
    window.controller.submitted.disconnect(watch._submitted)
    assert not result.stopped and len(result.chapters) == 2
    assert seen and seen[-1]["stage"] == "finished" and seen[-1]["chunks_done"] == seen[-1]["chunks_total"]
    one = next(r for r in range(panel.chapters.rowCount()) if panel.chapters.item(r, 0).text() == "1")
    bar = panel.chapters.cellWidget(one, 3)
    assert bar.value() == bar.maximum() == 3 and panel.chapters.item(one, 5).text() == "written"
    assert (out / "The Test Book.m4b").exists() and (out / "01 - Chapter One.flac").exists()
    assert "finished: 2 chapter(s)" in panel.progress.text()
    # the chunks of the selected chapter; one played (its samples from the chapter), one made again
    panel.chapters.selectRow(one)
    assert panel.chunks.rowCount() == 3 and panel.chunks.item(1, 1).text().startswith("It was a bright day.")
    played = []
    panel.play_audio_requested.connect(played.append)
    panel.chunks.selectRow(1)
    panel.play_chunk()
    meta = json.loads((out / ".kazeia-book" / "chapters" / "001.json").read_text())
    cue = meta["cues"][1]
    chapter = soundfile.read(out / ".kazeia-book" / "chapters" / "001.wav", dtype="float32")[0]
    assert np.array_equal(played[0], chapter[cue["start"]:cue["end"]])
    journal = out / ".kazeia-book" / "chunks" / "journal.jsonl"
    lines = len(journal.read_text().splitlines())
    screenshot(window.book_dialog, "workbench-book")
    _render(qtbot, window, panel.redo_button.click)
    assert len(journal.read_text().splitlines()) == lines + 1   # that chunk alone
    assert panel.chunks.rowCount() == 3


def test_the_folder_is_the_state_in_a_new_window(qtbot, workdir):
    first = make_window(qtbot, workdir)
    try:
        first.sampling.max_frames.setValue(4)
        assert first.book.open_book(str(make_epub(workdir / "b.epub")))
        first.book.save_settings()
        _render(qtbot, first, first.book.render_button.click)
    finally:
        first.controller.shutdown()
    second = make_window(qtbot, workdir)   # the same settings file: the book and its folder come back
    try:
        panel = second.book
        assert panel.book is not None and panel.book.title == "The Test Book"
        rows = [r for r in range(panel.chapters.rowCount()) if panel.chapters.item(r, 0).text().isdigit()]
        assert [panel.chapters.item(r, 5).text() for r in rows] == ["written", "written"]
        result = _render(qtbot, second, panel.render_button.click)
        assert result.progress.chunks_kept == result.progress.chunks_total   # nothing spoken again
    finally:
        second.controller.shutdown()
