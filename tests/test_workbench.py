"""The workbench, headless (offscreen; scripts/test.sh runs it again under Xvfb): generate with
streaming on the demo model, cancel, errors, A/B, export round trip, settings, takes across a
restart, and playback captured from an ALSA device and compared with the take."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

pytest.importorskip("PySide6")
from PySide6.QtCore import QSettings, QTimer  # noqa: E402

from kazeia.app.audio_output import AudioOutput  # noqa: E402
from kazeia.app.loudness import loudness, matched_gain  # noqa: E402
from kazeia.app.main_window import MainWindow  # noqa: E402
from kazeia.app.takes import TakeStore  # noqa: E402

ARTIFACTS = Path(__file__).parent / "artifacts"
TIMEOUT_MS = 120_000


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.setenv("KAZEIA_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def make_window(qtbot, workdir, audio=None, model=None) -> MainWindow:
    settings = QSettings(str(workdir / "settings.ini"), QSettings.IniFormat)
    window = MainWindow(model, settings=settings, audio=audio or AudioOutput(),
                        store=TakeStore(workdir / "data"))
    qtbot.addWidget(window)
    window.show()
    qtbot.waitUntil(lambda: window.info is not None, timeout=TIMEOUT_MS)
    window.controller.destroyed.connect(lambda: None)
    return window


@pytest.fixture
def window(qtbot, workdir):
    w = make_window(qtbot, workdir)
    yield w
    w.controller.cancel()
    w.controller.shutdown()


def generate(qtbot, window, frames=8, seed=0, text=None, timeout_ms=TIMEOUT_MS):
    window.max_frames.setValue(frames)
    window.seed.setValue(seed)
    if text:
        window.text.setPlainText(text)
    with qtbot.waitSignal(window.controller.finished, timeout=timeout_ms) as blocker:
        window.generate()
    return blocker.args[0]


def test_generate_streams_and_keeps_a_take(qtbot, window):
    assert "RANDOM WEIGHTS" in window.model_label.text()
    chunks, ticks = [], []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)

    live_bars = []

    def on_chunk(chunk):   # runs after the window's own handler
        chunks.append(chunk.first_frame)
        live_bars.append(len(window.latency.bars["decoder"].opts["height"]) == chunk.first_frame + chunk.frames)
        if chunk.first_frame == 1:   # a screenshot while frames are still arriving
            ARTIFACTS.mkdir(exist_ok=True)
            window.grab().save(str(ARTIFACTS / "workbench_streaming.png"))
    window.controller.chunk_ready.connect(on_chunk)
    start = time.perf_counter()
    result = generate(qtbot, window, frames=40)
    elapsed_ms = 1000 * (time.perf_counter() - start)
    timer.stop()
    qtbot.waitUntil(lambda: len(window.store.takes) == 1, timeout=5000)
    assert chunks == [0, *range(1, 40, 4)] and result.stop_reason == "limit"   # frame 0 alone, then 4 per launch
    assert all(live_bars)   # the latency view followed every chunk while generating
    # the GUI thread kept running while the engine worked: a blocked one coalesces its ticks into one
    assert len(ticks) >= max(3, 0.3 * elapsed_ms / 10), (len(ticks), elapsed_ms)
    take = window.store.takes[0]
    assert np.array_equal(window.store.audio(take), result.audio)
    assert take.sampling["seed"] == 0 and take.request["speaker"] == window.speaker.currentText()
    assert take.placement == {"talker": "cpu", "code_predictor": "cpu", "decoder": "cpu"}
    assert "TTFA" in window.stats.text() and window.take_list.count() == 1
    heights = window.latency.bars["decoder"].opts["height"]
    assert len(heights) == 40 and (np.asarray(heights) > 0).all()
    assert (ARTIFACTS / "workbench_streaming.png").stat().st_size > 10_000


def test_stop_cancels_within_a_frame(qtbot, window):
    window.max_frames.setValue(400)
    made = []

    def on_chunk(chunk):
        if not made:
            made.append(chunk.timings.frames)
            window.stop()
            made.append(window.controller._stream._timings.frames)   # frames finished when Stop was pressed
    window.controller.chunk_ready.connect(on_chunk)
    with qtbot.waitSignal(window.controller.finished, timeout=TIMEOUT_MS) as blocker:
        window.generate()
    result = blocker.args[0]
    assert result.stop_reason == "cancelled"
    assert len(result.codes) <= made[1] + 1 < 400   # at most one frame after Stop
    assert window.generate_button.isEnabled() and not window.stop_button.isEnabled()


def test_errors_show_in_the_status_bar(qtbot, window, workdir):
    bad = workdir / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    with qtbot.waitSignal(window.controller.failed, timeout=TIMEOUT_MS):
        window.load_model(str(bad))
    assert "error: cannot open" in window.statusBar().currentMessage()
    window.text.setPlainText("   ")
    with qtbot.waitSignal(window.controller.failed, timeout=TIMEOUT_MS):
        window.generate()
    assert "text is empty" in window.statusBar().currentMessage()
    window.text.setPlainText("Still alive after errors.")
    assert generate(qtbot, window, frames=3).stop_reason == "limit"


def test_takes_survive_a_restart_and_restore_settings(qtbot, workdir):
    w = make_window(qtbot, workdir)
    generate(qtbot, w, frames=4, seed=42, text="Remember me.")
    w.text.setPlainText("changed")
    w.seed.setValue(7)
    w.placement["decoder"].setCurrentText("accel-sched")
    w.close()
    w2 = make_window(qtbot, workdir)
    assert [t.text for t in w2.store.takes] == ["Remember me."]
    assert w2.text.toPlainText() == "changed" and w2.seed.value() == 7      # settings persisted
    assert w2.placement["decoder"].currentText() == "accel-sched"
    w2.take_list.setCurrentRow(0)
    w2.restore_take()
    assert w2.text.toPlainText() == "Remember me." and w2.seed.value() == 42
    assert w2.placement["decoder"].currentText() == "cpu"
    w2.controller.shutdown()


def test_export_round_trip(qtbot, window, workdir):
    generate(qtbot, window, frames=6, text="Export me.")
    window.take_list.selectAll()
    take = window.store.takes[0]
    audio = window.store.audio(take)
    for fmt, tol in (("wav-float", 0.0), ("wav-16", 1 / 2 ** 15), ("flac", 1 / 2 ** 23)):
        window.export_format.setCurrentText(fmt)
        paths = window.export_selected(str(workdir / "out" / fmt))
        assert len(paths) == 1 and paths[0].exists()
        back, sr = soundfile.read(paths[0], dtype="float32")
        assert sr == 24000 and back.shape == audio.shape
        assert float(np.abs(back - audio).max()) <= tol
        meta = json.loads(Path(str(paths[0]) + ".json").read_text())
        assert meta["text"] == "Export me." and meta["sampling"]["seed"] == take.sampling["seed"]
        with soundfile.SoundFile(paths[0]) as f:
            assert f.software.startswith("Kazeia") and "Export me." in f.title
    # a failed export (unwritable folder) loses nothing
    blocked = workdir / "blocked"
    blocked.write_text("a file, not a folder")
    assert window.export_selected(str(blocked / "x")) == []
    assert window.store.takes and "export failed" in window.statusBar().currentMessage()


def test_loudness_matching():
    sr = 24000
    t = np.arange(sr) / sr
    a = (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    b = a * np.float32(10 ** (6 / 20))   # +6 dB
    matched_a = a * matched_gain(a, sr)
    matched_b = b * matched_gain(b, sr)
    assert abs(loudness(matched_a, sr) - loudness(matched_b, sr)) < 0.05


def capture_device(audio: AudioOutput):
    return next((i for i, name in audio.devices() if "kazeia_capture" in name or "Kazeia test capture" in name), None)


def test_ab_switches_between_two_takes(qtbot, workdir):
    audio = AudioOutput()
    device = capture_device(audio)
    if device is None:
        pytest.skip(f"no ALSA capture device ({audio.reason or 'PortAudio lists none'})")
    w = make_window(qtbot, workdir, audio=audio)
    audio.set_device(device)
    generate(qtbot, w, frames=30, seed=1)
    generate(qtbot, w, frames=30, seed=2)
    w.take_list.selectAll()
    w.start_ab()
    first = w.playing
    assert first is not None and w.ab_pair is not None
    qtbot.wait(50)
    w.switch_ab()
    assert w.playing is not first and w.playing in w.ab_pair
    w.switch_ab()
    assert w.playing is first
    assert "A:" in w.ab_label.text() and "B:" in w.ab_label.text()
    w.take_list.setCurrentRow(0)
    w.waveform.seek_requested.emit(0.5)   # a click on the waveform seeks there
    assert w.playing is not None and audio.position >= int(0.5 * 24000)
    w.stop_playback()
    w.controller.shutdown()


def test_playback_reaches_the_audio_device(qtbot, workdir):
    """What the workbench plays is captured by an ALSA file device and equals the take."""
    capture = Path(os.environ["KAZEIA_CAPTURE_FILE"])
    audio = AudioOutput()
    device = capture_device(audio)
    if device is None:
        pytest.skip(f"no ALSA capture device ({audio.reason or 'PortAudio lists none'})")
    w = make_window(qtbot, workdir, audio=audio)
    w.play_live.setChecked(False)
    generate(qtbot, w, frames=10, seed=5)
    audio.set_device(device)
    take = w.store.takes[-1]
    w.take_list.setCurrentRow(0)
    w.toggle_play()
    assert w.playing is take, w.statusBar().currentMessage()
    qtbot.waitUntil(lambda: audio.position >= len(w.store.audio(take)), timeout=30_000)
    qtbot.waitUntil(lambda: not audio.playing, timeout=30_000)
    audio.stop()
    # (the file plugin may reopen the file per stream: look for the take anywhere in it)
    captured = np.fromfile(capture, dtype=np.float32)
    played = captured[captured != 0]   # the null device inserts silence, not at real-time pace
    expected = w.store.audio(take)
    expected = expected[expected != 0]
    starts = np.flatnonzero(played == expected[0])
    assert any(np.array_equal(played[i:i + len(expected)], expected) for i in starts), \
        f"the take was not found bit for bit among {len(played)} captured samples"
    w.controller.shutdown()


def test_runs_without_an_audio_device(qtbot, workdir):
    class NoAudio(AudioOutput):
        def devices(self):
            self.reason = "no audio output device: playback is off, export still works"
            return []
    w = make_window(qtbot, workdir, audio=NoAudio())
    assert not w.device_box.isEnabled() and not w.play_live.isChecked()
    generate(qtbot, w, frames=3)
    w.take_list.setCurrentRow(0)
    w.toggle_play()
    assert "no audio output" in w.statusBar().currentMessage()
    assert len(w.store.takes) == 1
    w.controller.shutdown()


def test_opens_a_checkpoint_folder_with_conversion_progress(qtbot, workdir):
    from goldens import checkpoint_dir
    w = make_window(qtbot, workdir)
    progress = []
    w.controller.conversion.connect(lambda done, total: progress.append((done, total)))
    with qtbot.waitSignal(w.controller.loaded, timeout=TIMEOUT_MS):
        w.load_model(str(checkpoint_dir("voice_design")))
    assert w.info.variant == "voice_design" and w.instruct.isEnabled() and not w.speaker.isEnabled()
    assert progress and progress[-1][0] == progress[-1][1]
    assert (workdir / "data" / "models" / "tiny-voice_design-f16.gguf").exists()
    w.instruct.setText("A calm voice.")
    assert generate(qtbot, w, frames=3).stop_reason == "limit"
    w.controller.shutdown()


def test_voice_library_for_base_models(qtbot, workdir, converted):
    from goldens import GOLDEN
    ref = np.load(GOLDEN / "base_xvec_stream.npz")["ref_wav"]
    audio_path = workdir / "my voice.wav"
    soundfile.write(audio_path, ref, 24000)
    w = make_window(qtbot, workdir, model=str(converted("base")))
    assert w.profile.isEnabled() and w.profile.count() == 0
    w.text.setPlainText("Cloned hello.")
    w.generate()   # no profile yet: a clear message, not a crash
    assert "pick or create a voice profile" in w.statusBar().currentMessage() and not w.controller.busy
    assert w.add_voice(str(audio_path)) == "my voice"
    bad = workdir / "silence.wav"
    soundfile.write(bad, np.zeros(48000, np.float32), 24000)
    assert w.add_voice(str(bad)) is None and "silent" in w.statusBar().currentMessage()
    result = generate(qtbot, w, frames=4)
    assert result.stop_reason == "limit"
    assert w.store.takes[-1].request["voice_profile"] == "my voice"
    assert w.add_voice(str(audio_path), name="with text", transcript="Hello there, nice to meet you.") == "with text"
    assert w.voices.load("with text", w.controller.engine.model).ref_codes is not None
    assert generate(qtbot, w, frames=4).stop_reason == "limit"   # in-context cloning
    w.controller.shutdown()


def test_a_damaged_take_index_loses_no_takes(tmp_path):
    store = TakeStore(tmp_path)
    from kazeia.app.takes import Take
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


def test_placement_takes_say_where_each_stage_ran(qtbot, window):
    """Backend A/B: a take made under accel-sched and one under cpu each say where every stage ran.
    In the Vulkan pass of scripts/test.sh accel-sched runs on lavapipe's Vulkan0, every op of every
    stage on it; on the CPU-only pass the scheduler runs over the CPU alone."""
    from kazeia.engine.placement import sched_device
    accel = sched_device()
    for box in window.placement.values():
        box.setCurrentText("accel-sched")
    # (a first run on lavapipe compiles ggml's pipelines with LLVM: minutes, then cached on disk)
    sched = generate(qtbot, window, frames=6, seed=3, timeout_ms=800_000)
    assert window.store.takes[-1].placement == dict.fromkeys(("talker", "code_predictor", "decoder"), "accel-sched")
    where = window.store.takes[-1].where
    assert set(where) == {"talker", "code_predictor", "decoder"}
    device = accel["name"] if accel else "CPU"
    for stage, line in where.items():
        assert line.startswith(f"accel-sched: {device} ") and "fall" not in line, line
        assert f"{stage.replace('_', ' ')} on accel-sched: {device}" in window.where.text()
    assert "NOT ALL" not in window.where.text()
    for box in window.placement.values():
        box.setCurrentText("cpu")
    cpu = generate(qtbot, window, frames=6, seed=3)
    assert all(line.startswith("cpu: CPU ") for line in window.store.takes[-1].where.values())
    if accel is None:   # the same arithmetic: the same take
        assert np.array_equal(cpu.codes, sched.codes)
    assert len(sched.codes) == len(cpu.codes) == 6
    window.take_list.setCurrentRow(1)   # selecting the earlier take shows where it ran
    assert f"on accel-sched: {device}" in window.where.text()
