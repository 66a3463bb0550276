"""The takes panel: the table's columns, sorting and model filter, takes that survive a restart and
give their settings back, export (WAV float, WAV 16-bit, FLAC) round trips, delete asks first, and a
damaged index loses no takes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

pytest.importorskip("PySide6")
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from kazeia.app.panels.takes import COLUMNS  # noqa: E402
from kazeia.app.takes import Take, TakeStore  # noqa: E402
from support.workbench import ALL_CPU, generate, make_window  # noqa: E402
from support.workbench import window, workdir  # noqa: E402,F401 (fixtures)


def test_takes_table_columns_sorting_and_model_filter(qtbot, window):
    here = str(window.info.path)
    for i, (model, seed) in enumerate(((here, 7), ("/elsewhere/other.gguf", 3), (here, 1))):
        window.store.add(Take(id=f"t{i}", created=1000.0 + i, text=f"take {i}", model=model,
                              request={"speaker": "x"}, sampling={"seed": seed}, placement=ALL_CPU, threads=1,
                              timings={"frames": 10, "rtf": 0.5, "frame_seconds": 0.08}, stop_reason="eos",
                              sample_rate=24000, audio=np.zeros(19200, np.float32)))
    window.takes.refresh()
    proxy = window.takes.proxy
    assert [proxy.headerData(c, Qt.Horizontal) for c in range(proxy.columnCount())] == list(COLUMNS)
    assert proxy.rowCount() == 2   # "this model only" is on by default
    window.takes.only_this_model.setChecked(False)
    assert proxy.rowCount() == 3
    window.takes.table.sortByColumn(COLUMNS.index("seed"), Qt.AscendingOrder)
    assert [proxy.index(r, COLUMNS.index("seed")).data() for r in range(3)] == ["1", "3", "7"]
    assert proxy.index(0, COLUMNS.index("stop")).data() == "end"
    assert proxy.index(0, COLUMNS.index("seconds")).data() == "0.80"


def test_takes_survive_a_restart_and_restore_settings(qtbot, workdir):
    w = make_window(qtbot, workdir)
    generate(qtbot, w, frames=4, seed=42, text="Remember me.")
    w.text.setPlainText("changed")
    w.sampling.seed.setValue(7)
    w.backend.set_placement({"decoder": "accel-sched"})
    w.close()
    w2 = make_window(qtbot, workdir)
    assert [t.text for t in w2.store.takes] == ["Remember me."]
    assert w2.text.toPlainText() == "changed" and w2.sampling.seed.value() == 7
    assert w2.backend.placement["decoder"].currentText() == "accel-sched"
    w2.takes.select(w2.store.takes[0])
    w2.takes.restore_button.click()
    assert w2.text.toPlainText() == "Remember me." and w2.sampling.seed.value() == 42
    assert w2.backend.placement["decoder"].currentText() == "cpu"
    w2.controller.shutdown()


def test_export_round_trip(qtbot, window, workdir):
    generate(qtbot, window, frames=6, text="Export me.")
    window.takes.table.selectAll()
    take = window.store.takes[0]
    audio = window.store.audio(take)
    for fmt, tol in (("wav-float", 0.0), ("wav-16", 1 / 2 ** 15), ("flac", 1 / 2 ** 23)):
        window.takes.export_format.setCurrentText(fmt)
        paths = window.takes.export_selected(str(workdir / "out" / fmt))
        assert len(paths) == 1 and paths[0].exists()
        back, sr = soundfile.read(paths[0], dtype="float32")
        assert sr == 24000 and back.shape == audio.shape
        assert float(np.abs(back - audio).max()) <= tol
        meta = json.loads(Path(str(paths[0]) + ".json").read_text())
        assert meta["text"] == "Export me." and meta["sampling"]["seed"] == take.sampling["seed"]
        with soundfile.SoundFile(paths[0]) as f:
            assert f.software.startswith("Kazeia") and "Export me." in f.title
    blocked = workdir / "blocked"   # a failed export (unwritable folder) loses nothing
    blocked.write_text("a file, not a folder")
    assert window.takes.export_selected(str(blocked / "x")) == []
    assert window.store.takes and "export failed" in window.banner_text.text()


def test_delete_asks_first(qtbot, window, monkeypatch):
    generate(qtbot, window, frames=2)
    window.takes.select(window.store.takes[0])
    answers = []

    def ask(*args):
        answers.append(args[2])
        return QMessageBox.No
    monkeypatch.setattr(QMessageBox, "question", ask)
    window.takes.delete_selected()
    assert len(window.store.takes) == 1 and "Delete 1 take" in answers[0]
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.Yes)
    window.takes.delete_selected()
    assert window.store.takes == []


def test_a_damaged_take_index_loses_no_takes(tmp_path):
    store = TakeStore(tmp_path)
    for i in range(2):
        store.add(Take(id=f"t{i}", created=0.0, text=f"take {i}", model="m", request={}, sampling={"seed": i},
                       placement={}, threads=1, timings={}, stop_reason="eos", sample_rate=24000,
                       audio=np.full(2400, 0.1 * (i + 1), np.float32)))
    (store.folder / "index.json").write_text("{ not json")
    again = TakeStore(tmp_path)
    assert sorted(t.id for t in again.takes) == ["t0", "t1"]
    assert np.allclose(again.audio(again.takes[1]), 0.2)
    assert list(store.folder.glob("index.damaged-*.json"))   # the damaged index is kept aside
    assert json.loads((store.folder / "index.json").read_text())   # and a good one written


def test_the_window_says_what_was_damaged_and_shows_take_text_as_text(qtbot, workdir):
    """(takes come from files a user may have been given: their text is never read as markup)"""
    from kazeia.app.panels.takes import take_details
    store = TakeStore(workdir / "data")
    store.add(Take(id="t0", created=0.0, text="<img src=x> & <b>bold</b>", model="m", request={}, sampling={"seed": 0},
                   placement={}, threads=1, timings={}, stop_reason="eos", sample_rate=24000,
                   audio=np.full(2400, 0.1, np.float32)))
    details = take_details(TakeStore(workdir / "data").takes[0])
    assert "&lt;img src=x&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in details and "<img" not in details
    (store.folder / "index.json").write_text("[" * 100_000)
    window = make_window(qtbot, workdir)
    try:
        assert "takes: " in window.session.recent_messages() and "nested deeper" in window.session.recent_messages()
        assert [t.id for t in window.store.takes] == ["t0"]
    finally:
        window.controller.cancel()
        window.controller.shutdown()
