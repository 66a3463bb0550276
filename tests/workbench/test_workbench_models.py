"""File > Get models: the released models listed with what they can do and their sizes; a download
from a hub on loopback (tests/support/fake_hub.py, the real huggingface_hub client) cancelled half-way while
a take is made in the window (nothing registered), then one completed: verified, converted,
registered, listed as installed and opened in the window; a failure shown as one line."""
from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
from support.fake_hub import FakeHub, FakeRepo  # noqa: E402
from support.goldens import checkpoint_dir  # noqa: E402
from support.workbench import generate, screenshot, window, workdir  # noqa: E402,F401 (fixtures)

from kazeia.engine.models.catalog import KNOWN_MODELS  # noqa: E402
from kazeia.engine.models.registry import Registry  # noqa: E402

CV_REPO = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"


@pytest.fixture
def hub(workdir, monkeypatch):
    """The tiny CustomVoice checkpoint served as the 0.6B CustomVoice release; its weights slowly."""
    server = FakeHub({CV_REPO: FakeRepo.from_folder(checkpoint_dir("custom_voice"), CV_REPO)}).start()
    for var in ("HF_HUB_OFFLINE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(workdir / "hf"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    yield server
    server.stop()


def test_get_a_model_cancel_one_download_then_complete_it_and_open_it(qtbot, window, hub):
    panel = window.models
    window.show_models()
    qtbot.waitUntil(lambda: window.models_dialog.isVisible())
    released = [m for m in KNOWN_MODELS if not m.codec]
    assert panel.table.rowCount() == len(released)
    cells = [[panel.table.item(r, c).text() for c in range(panel.table.columnCount())] for r in range(len(released))]
    assert cells[0][0] == "0.6b-customvoice (0.6B)" and "speakers" in cells[0][1] and cells[0][4] == "no"
    assert any("described in words" in row[1] for row in cells) and any("cloning" in row[1] for row in cells)
    assert all(row[2].endswith("GB") for row in cells)   # download sizes

    # 1. a slow download, cancelled while a take is made in the window (the window stays live)
    weights = "model.safetensors"
    # ~3.5 s and ~1 s at this pace: time to see the speed, make a take and cancel mid-file
    hub.pace.update({weights: 2e6, "speech_tokenizer/model.safetensors": 2e6})
    panel.select("0.6b-customvoice")
    assert panel.get_button.isEnabled() and panel.get_button.text() == "Download and open"
    panel.get_button.click()
    assert panel.pulling and panel.cancel_button.isVisible() and not panel.get_button.isEnabled()
    qtbot.waitUntil(lambda: "downloading" in panel.status.text(), timeout=30_000)
    result = generate(qtbot, window, frames=4, text="A take while a model downloads.")
    assert len(result.audio) == 4 * 1920 and panel.pulling
    qtbot.waitUntil(lambda: "MB/s" in panel.status.text(), timeout=30_000)   # speed and time left
    assert "left" in panel.status.text()
    screenshot(window.models_dialog, "get-models-downloading")
    panel.cancel_button.click()
    qtbot.waitUntil(lambda: not panel.pulling, timeout=30_000)
    assert panel.status.text().startswith("cancelled") and Registry().entries() == []
    assert not panel.progress.isVisible() and panel.table.item(0, 4).text() == "no"
    assert window.info.path.name.startswith("demo")   # still the demo model

    # 2. the same download to its end: verified, converted, registered, listed, opened
    hub.pace.clear()
    panel.get_button.click()
    qtbot.waitUntil(lambda: not panel.pulling, timeout=120_000)
    entries = Registry().entries()
    assert [e.name for e in entries] == ["0.6b-customvoice"], panel.status.text()
    entry = entries[0]
    assert entry.source == CV_REPO and entry.revision == hub.repos[CV_REPO].commit and entry.type == "q8_0"
    qtbot.waitUntil(lambda: window.info is not None and str(window.info.path) == entry.path, timeout=120_000)
    assert window.info.variant == "custom_voice"
    assert panel.table.item(0, 4).text() == "0.6b-customvoice: q8_0"
    assert panel.open_button.isEnabled() and panel.get_button.text() == "Update"
    assert "opening it" in panel.status.text()
    screenshot(window.models_dialog, "get-models")
    result = generate(qtbot, window, frames=4, text="Now on the pulled model.")
    assert len(result.audio) == 4 * 1920

    # 3. pulled again: up to date, nothing fetched
    fetched = len(hub.gets(weights))
    panel.get_button.click()
    qtbot.waitUntil(lambda: not panel.pulling, timeout=60_000)
    assert len(hub.gets(weights)) == fetched and "nothing to download" in panel.status.text()


def test_a_failed_download_is_one_line_and_registers_nothing(qtbot, window, hub, monkeypatch):
    panel = window.models
    window.show_models()
    hub.repos.clear()   # the hub has no such repository: 404
    panel.select("1.7b-voicedesign")
    panel.get_button.click()
    qtbot.waitUntil(lambda: not panel.pulling, timeout=60_000)
    message = panel.status.text()
    assert "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign" in message and "\n" not in message and "Traceback" not in message
    assert "b00020" in panel.status.styleSheet() and Registry().entries() == []
    assert window.info.path.name.startswith("demo")
