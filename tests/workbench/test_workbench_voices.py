"""The voice library with a Base model: profiles made on the worker (x-vector and in-context),
a silent reference refused with a message, takes with a profile, preview, delete asks first."""
from __future__ import annotations


import numpy as np
import pytest
import soundfile

pytest.importorskip("PySide6")
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from support.workbench import TIMEOUT_MS, generate, make_window, screenshot  # noqa: E402
from support.workbench import workdir  # noqa: E402,F401 (fixtures)


def test_voice_library_for_base_models(qtbot, workdir, converted, monkeypatch):
    from support.goldens import GOLDEN
    ref = np.load(GOLDEN / "base_xvec_stream.npz")["ref_wav"]
    audio_path = workdir / "my voice.wav"
    soundfile.write(audio_path, ref, 24000)
    w = make_window(qtbot, workdir, model=str(converted("base")))
    assert w.voice.profile.isEnabled() and w.voice.profile.count() == 0
    w.text.setPlainText("Cloned hello.")
    assert not w.presenter.core.generate()   # no profile yet: a clear message, not a crash
    assert "pick or create a voice profile" in w.banner_text.text() and not w.controller.busy
    with qtbot.waitSignal(w.presenter.voices.voice_created, timeout=TIMEOUT_MS):
        assert w.presenter.voices.add_voice(str(audio_path)) == "my voice"
    bad = workdir / "silence.wav"
    soundfile.write(bad, np.zeros(48000, np.float32), 24000)
    with qtbot.waitSignal(w.error_shown, timeout=TIMEOUT_MS):
        w.presenter.voices.add_voice(str(bad))
    assert "silent" in w.banner_text.text()
    assert generate(qtbot, w, frames=4).stop_reason == "limit" and not w.banner.isVisible()
    assert w.store.takes[-1].request["voice_profile"] == "my voice"
    with qtbot.waitSignal(w.presenter.voices.voice_created, timeout=TIMEOUT_MS):
        w.presenter.voices.add_voice(str(audio_path), name="with text", transcript="Hello there, nice to meet you.")
    w.voice.profile.setCurrentText("with text")
    assert "in-context" in w.voice.profile_info.text()
    assert generate(qtbot, w, frames=4).stop_reason == "limit"   # in-context cloning
    w.workspace.show_page(w.library)
    kinds = {w.library.table.item(r, 0).text(): w.library.table.item(r, 1).text()
             for r in range(w.library.table.rowCount())}
    assert kinds == {"my voice": "x-vector", "with text": "in-context"}
    screenshot(w, "workbench_voice_library")
    takes = len(w.store.takes)
    with qtbot.waitSignal(w.presenter.voices.preview_played, timeout=TIMEOUT_MS) as blocker:
        w.presenter.voices.preview_voice("my voice")   # a short fixed sentence, not a take
    assert 0 < len(blocker.args[0]) < 24000 * 20 and len(w.store.takes) == takes
    jobs = []
    w.controller.submitted.connect(jobs.append)
    with qtbot.waitSignal(w.presenter.voices.preview_played, timeout=TIMEOUT_MS) as again:
        w.presenter.voices.preview_voice("my voice")   # made once: from the library's cache the second time
    assert not jobs and np.array_equal(again.args[0], blocker.args[0])
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.No)
    w.library.delete("my voice")
    assert "my voice" in w.voices.names()
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.Yes)
    w.library.delete("my voice")
    assert w.voices.names() == ["with text"]
    w.controller.shutdown()


def test_keep_a_designed_voice_and_a_library_shared_by_two_windows(qtbot, workdir, converted, monkeypatch, tmp_path):
    """A VoiceDesign take kept with the Base model pulled before (the registry's): a designed profile in
    the library; notes and tags, search, export and import in the panel; a second window on the same
    data folder sees what the first wrote, and the first sees the second's rename."""
    from kazeia.engine.models.registry import ModelEntry, Registry
    base = converted("base")
    Registry().add(ModelEntry(name="tiny-base", path=str(base), source="test", revision="0", type="f32",
                              decoder_type="f32", variant="base", size="tiny", file_bytes=base.stat().st_size,
                              added="2026-12-07T00:00:00Z"))
    w = make_window(qtbot, workdir, model=str(converted("voice_design")))
    w.voice.instruct.setText("A calm, low voice that speaks slowly.")
    w.voice.language.setCurrentText("english")
    generate(qtbot, w, frames=40, seed=3, text="The kept voice says this sentence.")
    take = w.store.takes[-1]
    with qtbot.waitSignal(w.presenter.voices.voice_kept, timeout=TIMEOUT_MS) as kept:
        assert w.presenter.voices.keep_voice(take, "calm designed") is not None
    assert kept.args[0] == ["calm designed"]
    entry = w.voices.entry("calm designed")
    assert (entry.source, entry.kind, entry.transcript) == ("designed", "in-context", "The kept voice says this sentence.")
    w.workspace.show_page(w.library)
    w.library.describe("calm designed", notes="slow narrator", tags="calm, designed", language="english")
    w.library.search.setText("slow calm")
    assert [w.library.table.item(r, 0).text() for r in range(w.library.table.rowCount())] == ["calm designed"]
    screenshot(w, "workbench_voice_library_kept")
    w.library.export("calm designed", str(tmp_path / "calm.kzvoice"))
    assert w.library.import_file(str(tmp_path / "calm.kzvoice")) == "calm designed 2"
    w.library.search.setText("")
    # a second workbench on the same data folder
    other = make_window(qtbot, workdir, model=str(base))
    assert set(other.voices.names()) == {"calm designed", "calm designed 2"}
    other.workspace.show_page(other.library)
    other.library.rename("calm designed 2", "imported calm")
    assert other.voice.profile.findText("imported calm") >= 0   # (a Base model: the voice panel lists it)
    w.workspace.show_page(w.takes)
    w.workspace.show_page(w.library)   # shown again: read again
    names = [w.library.table.item(r, 0).text() for r in range(w.library.table.rowCount())]
    assert names == ["calm designed", "imported calm"]
    # no Base model at hand: a clear message
    Registry().remove("tiny-base")
    assert w.presenter.voices.keep_voice(take) is None and "needs a Base model" in w.banner_text.text()
    other.controller.shutdown()
    w.controller.shutdown()
