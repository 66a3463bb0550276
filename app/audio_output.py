"""Audio playback through sounddevice (PortAudio). Volume and the limiter are applied before audio
enters the buffer (levels.OutputLevel); the callback only copies from that buffer, allocated up
front. With no sound card (or no PortAudio) the output reports why and the app runs on."""
from __future__ import annotations

import threading

import numpy as np

from .audio_levels import OutputLevel, level_of


class AudioOutput:
    def __init__(self, sample_rate: int = 24000):
        self.sample_rate = sample_rate
        self.device: int | str | None = None
        self._sd = None
        self.reason = ""
        try:
            import sounddevice
            self._sd = sounddevice
        except (ImportError, OSError) as e:   # OSError: PortAudio library not found
            self.reason = f"audio output unavailable: {e}"
        self._lock = threading.Lock()
        self._stream = None
        self._buffer = np.zeros(0, np.float32)
        self._written = 0       # samples available to play
        self._position = 0      # samples played
        self._open_ended = False   # more audio may still arrive (streaming playback)
        self.level = OutputLevel(sample_rate)

    # -- devices -----------------------------------------------------------------------------
    def devices(self) -> list[tuple[int, str]]:
        if self._sd is None:
            return []
        try:
            return [(i, d["name"]) for i, d in enumerate(self._sd.query_devices()) if d["max_output_channels"] > 0]
        except Exception as e:   # PortAudio errors when no device exists
            self.reason = f"audio output unavailable: {e}"
            return []

    @property
    def available(self) -> bool:
        if self._sd is None:
            return False
        if not self.devices():
            self.reason = self.reason or "no audio output device: playback is off, export still works"
            return False
        return True

    def set_device(self, device: int | str | None) -> None:
        self.stop()
        self.device = device

    # -- playback ----------------------------------------------------------------------------
    def play(self, audio: np.ndarray, start: int = 0) -> None:
        """Plays a whole take from sample `start`."""
        self._start(len(audio), open_ended=False, initial=audio, start=start)

    def begin_stream(self, capacity: int) -> None:
        """Starts playback that `append` feeds while frames are generated."""
        self._start(capacity, open_ended=True)

    def append(self, chunk: np.ndarray) -> None:
        chunk = self.level.process(chunk)
        with self._lock:
            n = min(len(chunk), len(self._buffer) - self._written)
            self._buffer[self._written:self._written + n] = chunk[:n]
            self._written += n

    def end_stream(self) -> None:
        with self._lock:
            self._open_ended = False

    def stop(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                stream.abort()
                stream.close()
            except Exception:
                pass

    def set_volume(self, volume: float) -> None:
        """0..1; applies to what is played next (a playing take keeps its level)."""
        self.level.volume = min(max(float(volume), 0.0), 1.0)

    def meter(self, window: int = 2400) -> tuple[float, float]:
        """(peak, RMS) dBFS of what is being played now (the last `window` samples sent)."""
        with self._lock:
            end = self._position
            return level_of(self._buffer[max(0, end - window):end])

    @property
    def position(self) -> int:
        return self._position

    @property
    def playing(self) -> bool:
        return self._stream is not None and self._stream.active

    def _start(self, capacity: int, open_ended: bool, initial: np.ndarray | None = None, start: int = 0) -> None:
        self.stop()
        if not self.available:
            raise RuntimeError(self.reason)
        self.level.reset()
        if initial is not None:
            initial = self.level.process(initial)
        with self._lock:   # the buffer is ready before the stream's first callback
            if len(self._buffer) < capacity:
                self._buffer = np.zeros(capacity, np.float32)
            self._written = 0 if initial is None else len(initial)
            if initial is not None:
                self._buffer[:len(initial)] = initial
            self._position = min(max(start, 0), self._written)
            self._open_ended = open_ended
        sd = self._sd
        self._stream = sd.OutputStream(samplerate=self.sample_rate, channels=1, dtype="float32", device=self.device,
                                       callback=self._callback)
        self._stream.start()

    def _callback(self, outdata, frames, time_info, status) -> None:
        with self._lock:
            n = max(0, min(frames, self._written - self._position))
            outdata[:n, 0] = self._buffer[self._position:self._position + n]
            outdata[n:, 0] = 0.0
            self._position += n
            done = not self._open_ended and self._position >= self._written
        if done:
            raise self._sd.CallbackStop
