"""Playback: loudness matching and the limiter, what the workbench plays captured from an ALSA
device (equal to the take, within full scale), A/B switching at the same position, and a window
without any audio device."""
from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("PySide6")

from kazeia.app.audio_output import AudioOutput  # noqa: E402
from kazeia.app.audio_levels import CEILING, OutputLevel  # noqa: E402
from kazeia.engine.takes.loudness import loudness, matched_gain  # noqa: E402
from kazeia.app.takes import Take  # noqa: E402
from support.workbench import ALL_CPU, capture_device, capture_window, captured_audio, generate, make_window  # noqa: E402
from support.workbench import workdir  # noqa: E402,F401 (fixtures)


def test_loudness_matching():
    sr = 24000
    t = np.arange(sr) / sr
    a = (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    b = a * np.float32(10 ** (6 / 20))   # +6 dB
    assert abs(loudness(a * matched_gain(a, sr), sr) - loudness(b * matched_gain(b, sr), sr)) < 0.05


def test_limiter_keeps_every_sample_below_full_scale():
    level = OutputLevel(24000, volume=1.0)
    loud = (1.8 * np.sin(np.linspace(0, 200, 24000))).astype(np.float32)
    chunks = [level.process(loud[i:i + 1920]) for i in range(0, len(loud), 1920)]
    assert max(float(np.abs(c).max()) for c in chunks) <= CEILING and level.limited_db > 4
    quiet = level.process(0.1 * loud)   # a quiet passage is not turned down further than it was
    assert float(np.abs(quiet).max()) > 0.05
    level.volume = 0.5
    level.reset()
    assert np.allclose(level.process(0.2 * loud[:100]), 0.1 * loud[:100], atol=1e-6)


def test_the_test_devices_play_in_real_time():
    """An open stream on either test device consumes samples at about real time (the null device
    alone spins a core and fills the disk with silence)."""
    audio = AudioOutput()
    device = capture_device(audio)
    if device is None:
        pytest.skip(f"no ALSA capture device ({audio.reason or 'PortAudio lists none'})")
    for target in (device, None):
        audio.set_device(target)
        audio.play(np.full(24000 * 60, 0.01, np.float32))
        time.sleep(1.0)
        consumed = audio.position
        audio.stop()
        # the device's buffer lets it run ahead a little
        assert consumed < 3 * 24000, f"{consumed} samples in 1 s on {target}"


def test_ab_switches_between_two_takes(qtbot, workdir):
    w, audio = capture_window(qtbot, workdir)
    generate(qtbot, w, frames=30, seed=1)
    generate(qtbot, w, frames=30, seed=2)
    w.takes.table.selectAll()
    w.presenter.takes.start_ab()
    first = w.playback.playing
    assert first is not None and w.session.ab_pair is not None
    qtbot.wait(50)
    w.playback.switch_ab()
    assert w.playback.playing is not first and w.playback.playing in w.session.ab_pair
    w.playback.switch_ab()
    assert w.playback.playing is first
    assert "A:" in w.takes.ab_label.text() and "B:" in w.takes.ab_label.text()
    w.takes.select(w.store.takes[-1])
    w.take_view.seek_requested.emit(0.5)   # a click on the waveform seeks there
    assert w.playback.playing is not None and audio.position >= int(0.5 * 24000)
    w.playback.stop()
    w.controller.shutdown()


def test_playback_reaches_the_audio_device(qtbot, workdir):
    """What the workbench plays is captured by an ALSA file device and equals the take."""
    w, audio = capture_window(qtbot, workdir)
    w.sampling.play_live.setChecked(False)
    generate(qtbot, w, frames=10, seed=5)
    take = w.store.takes[-1]
    w.takes.select(take)
    w.presenter.takes.toggle_play()
    assert w.playback.playing is take, w.session.messages[-1:]
    qtbot.waitUntil(lambda: audio.position >= len(w.store.audio(take)), timeout=30_000)
    qtbot.waitUntil(lambda: not audio.playing, timeout=30_000)
    audio.stop()
    played, expected = captured_audio(), w.store.audio(take)   # (the file may hold earlier streams too)
    expected = expected[expected != 0]
    starts = np.flatnonzero(played == expected[0])
    assert any(np.array_equal(played[i:i + len(expected)], expected) for i in starts), \
        f"the take was not found bit for bit among {len(played)} captured samples"
    w.controller.shutdown()


def test_the_limiter_keeps_captured_playback_within_full_scale(qtbot, workdir):
    """A take at 1.5x full scale: what reaches the device stays below 1.0 (the file device may be
    reopened per stream: the take is looked for by its limited peak, and every sample it ever
    received is checked)."""
    w, audio = capture_window(qtbot, workdir)
    loud = (1.5 * np.sin(np.arange(24000) * 2 * np.pi * 440 / 24000)).astype(np.float32)
    take = w.store.add(Take(id="loud", created=time.time(), text="too loud", model=str(w.info.path), request={},
                            sampling={}, placement=ALL_CPU, threads=1, timings={}, stop_reason="eos",
                            sample_rate=24000, audio=loud))
    w.takes.refresh(select=take)
    w.presenter.takes.toggle_play()
    assert w.playback.playing is take, w.session.messages[-1:]
    qtbot.waitUntil(lambda: audio.position >= len(loud), timeout=30_000)
    qtbot.waitUntil(lambda: not audio.playing, timeout=30_000)
    audio.stop()
    # the limited sine peaks at the ceiling: 0.9 of its samples lie above 0.15
    qtbot.waitUntil(lambda: np.count_nonzero(np.abs(captured_audio()) > 0.9 * CEILING) >= 0.1 * 0.9 * len(loud),
                    timeout=10_000)
    played = captured_audio()
    assert float(np.abs(played).max()) <= CEILING <= 1.0
    w.controller.shutdown()


def test_runs_without_an_audio_device(qtbot, workdir):
    class NoAudio(AudioOutput):
        def devices(self):
            self.reason = "no audio output device: playback is off, export still works"
            return []
    w = make_window(qtbot, workdir, audio=NoAudio())
    assert not w.backend.device_box.isEnabled() and not w.sampling.play_live.isChecked()
    generate(qtbot, w, frames=3)
    w.takes.select(w.store.takes[0])
    w.presenter.takes.toggle_play()
    assert "no audio output" in w.no_output.text()   # stays visible, not a 5-second message
    assert "no audio output" in w.statusBar().currentMessage()
    assert len(w.store.takes) == 1
    w.controller.shutdown()
