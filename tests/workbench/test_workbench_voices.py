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
    assert not w.presenter.generate()   # no profile yet: a clear message, not a crash
    assert "pick or create a voice profile" in w.banner_text.text() and not w.controller.busy
    with qtbot.waitSignal(w.presenter.voice_created, timeout=TIMEOUT_MS):
        assert w.presenter.add_voice(str(audio_path)) == "my voice"
    bad = workdir / "silence.wav"
    soundfile.write(bad, np.zeros(48000, np.float32), 24000)
    with qtbot.waitSignal(w.error_shown, timeout=TIMEOUT_MS):
        w.presenter.add_voice(str(bad))
    assert "silent" in w.banner_text.text()
    assert generate(qtbot, w, frames=4).stop_reason == "limit" and not w.banner.isVisible()
    assert w.store.takes[-1].request["voice_profile"] == "my voice"
    with qtbot.waitSignal(w.presenter.voice_created, timeout=TIMEOUT_MS):
        w.presenter.add_voice(str(audio_path), name="with text", transcript="Hello there, nice to meet you.")
    w.voice.profile.setCurrentText("with text")
    assert "in-context" in w.voice.profile_info.text()
    assert generate(qtbot, w, frames=4).stop_reason == "limit"   # in-context cloning
    w.workspace.show_page(w.library)
    kinds = {w.library.table.item(r, 0).text(): w.library.table.item(r, 1).text()
             for r in range(w.library.table.rowCount())}
    assert kinds == {"my voice": "x-vector", "with text": "in-context"}
    screenshot(w, "workbench_voice_library")
    takes = len(w.store.takes)
    with qtbot.waitSignal(w.presenter.preview_played, timeout=TIMEOUT_MS) as blocker:
        w.presenter.preview_voice("my voice")   # a short fixed sentence, not a take
    assert 0 < len(blocker.args[0]) < 24000 * 20 and len(w.store.takes) == takes
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.No)
    w.library.delete("my voice")
    assert "my voice" in w.voices.names()
    monkeypatch.setattr(QMessageBox, "question", lambda *a: QMessageBox.Yes)
    w.library.delete("my voice")
    assert w.voices.names() == ["with text"]
    w.controller.shutdown()
