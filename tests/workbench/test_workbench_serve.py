"""The workbench's Serve panel: the loaded model served to the official openai client on loopback,
each request listed with its latency, a take made in the window meanwhile on the same engine, refusals
that say why (another address without a key, a port in use), and a stop that ends it."""
from __future__ import annotations

import socket
import threading

import pytest

pytest.importorskip("PySide6")
openai = pytest.importorskip("openai")
from kazeia.engine.serve.local import free_port  # noqa: E402
from support.workbench import generate, screenshot, window, workdir  # noqa: E402,F401 (fixtures)


def test_serve_the_loaded_model_from_the_window(qtbot, window):
    panel = window.serve
    window.serve_dialog.show()
    panel.port.setValue(free_port())
    panel.new_key.click()
    key = panel.api_key.text()
    assert len(key) >= 24
    panel.start_button.click()   # (started by the controller, off the GUI thread)
    qtbot.waitUntil(lambda: panel.serving, timeout=10_000)
    assert panel.start_button.text() == "Stop"
    assert panel.address in panel.status.text() and key in panel.status.text()
    assert "vivian" in panel.voice_list.text() and "alloy (serena)" in panel.voice_list.text()
    assert not panel.port.isEnabled()   # (the address is fixed while serving)
    client = openai.OpenAI(base_url=panel.address + "/v1", api_key=key, max_retries=0, timeout=60)
    got = {}

    def ask() -> None:
        got["audio"] = client.audio.speech.create(model="tts-1", voice="vivian", input="Hello from a client.",
                                                  response_format="pcm", extra_body={"max_frames": 6}).content
    asker = threading.Thread(target=ask)
    asker.start()
    result = generate(qtbot, window, frames=4, text="And a take in the window meanwhile.")   # the same engine
    asker.join(60)
    assert len(got["audio"]) == 6 * 1920 * 2 and len(result.audio) == 4 * 1920
    qtbot.waitUntil(lambda: panel.table.rowCount() == 1, timeout=10_000)
    row = [panel.table.item(0, c).text() for c in range(panel.table.columnCount())]
    assert row[2] == "vivian" and row[4] == "6" and row[-1] == "ok" and float(row[5]) > 0
    assert len(row[7].split(" / ")) == 3   # talker / code predictor / decoder ms per frame
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=panel.address + "/v1", api_key="wrong", max_retries=0).models.list()
    qtbot.waitUntil(lambda: window.serve_dialog.isVisible())
    screenshot(window.serve_dialog, "serve-panel")
    panel.start_button.click()
    qtbot.waitUntil(lambda: panel.status.text() == "stopped", timeout=10_000)
    assert not panel.serving
    with pytest.raises(openai.APIConnectionError):
        client.models.list()


def test_refusals_say_why(qtbot, window):
    panel = window.serve
    panel.host.setText("0.0.0.0")
    panel.api_key.setText("")
    assert not panel.start()
    assert "give an API key (New key)" in panel.status.text() and not panel.serving
    panel.api_key.setText("k")
    panel.wyoming.setChecked(True)   # (Wyoming has no keys: beyond loopback its clients are named)
    assert not panel.start()
    assert "Wyoming clients" in panel.status.text() and not panel.serving
    panel.wyoming_allow.setText("not a network")
    assert not panel.start() and "Wyoming clients 'not a network'" in panel.status.text()
    panel.wyoming.setChecked(False)
    panel.host.setText("127.0.0.1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        panel.port.setValue(taken.getsockname()[1])
        assert panel.start()   # (asked for: the controller finds the port taken)
        qtbot.waitUntil(lambda: "cannot listen on 127.0.0.1" in panel.status.text(), timeout=10_000)
        assert not panel.serving and "cannot listen" in window.banner_text.text()
    # settings are kept for the next session
    panel.port.setValue(8123)
    assert window.settings.value("serve/port") in (8123, "8123")
