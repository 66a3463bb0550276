"""What the audio output plays: a take (from a position, at a gain), a rendered file or a preview,
and A/B listening: two takes (the session's A/B pair), switching at the same position, loudness-matched
when asked (so the louder one does not win)."""
from __future__ import annotations

import numpy as np
import soundfile
from PySide6.QtCore import QObject, Signal

from kazeia.engine.takes.loudness import matched_gain


class Playback(QObject):
    status = Signal(str)   # a passing message (nothing to play on, what to select)
    error = Signal(str)

    def __init__(self, audio, session, has_output):
        super().__init__()
        self.audio, self.session, self.store = audio, session, session.store
        self._has_output = has_output   # () -> bool: an output device was chosen
        self.playing = None             # the Take playing, if a take plays
        self.match_loudness = True

    def _can_play(self) -> bool:
        if self._has_output() and self.audio.available:
            return True
        self.status.emit(self.audio.reason or "no audio output")
        return False

    def play_take(self, take, start: int = 0, gain: float = 1.0) -> None:
        if not self._can_play():
            return
        try:
            self.audio.play(self.store.audio(take) * np.float32(gain), start=start)
            self.playing = take
        except Exception as e:
            self.error.emit(f"playback failed: {e}")

    def play_audio(self, audio: np.ndarray) -> None:
        """Audio that is no take (a voice preview)."""
        if self._has_output() and self.audio.available:
            self.stop()
            self.audio.play(audio)

    def play_blind(self, audio: np.ndarray, start: int = 0) -> None:
        """A blind test's sound: plays like a take but is none (nothing on screen follows which it is)."""
        if not self._can_play():
            return
        try:
            self.playing = None
            self.audio.play(audio, start=start)
        except Exception as e:
            self.error.emit(f"playback failed: {e}")

    def play_file(self, path: str) -> None:
        if not self._can_play():
            return
        try:
            audio, _ = soundfile.read(path, dtype="float32")
            self.stop()
            self.audio.play(audio)
        except Exception as e:
            self.error.emit(f"cannot play {path}: {e}")

    def stop(self) -> None:
        self.audio.stop()
        self.playing = None

    def toggle(self, take) -> None:
        """Stops what plays, else plays `take` (the selected one)."""
        if self.audio.playing:
            self.stop()
        elif take is not None:
            self.play_take(take)

    # -- A/B ---------------------------------------------------------------------------------------
    def start_ab(self, a, b) -> str:
        """Plays A; returns what the pair is, in words."""
        self.session.ab_pair = (a, b)
        self.play_take(a, gain=self.gain(a))
        return (f"A: {a.label} ({a.voice}, seed {a.sampling.get('seed')})\n"
                f"B: {b.label} ({b.voice}, seed {b.sampling.get('seed')})\nB switches.")

    def switch_ab(self) -> None:
        """Switches between A and B at the same position."""
        if self.session.ab_pair is None:
            return
        a, b = self.session.ab_pair
        other = b if self.playing is a else a
        self.play_take(other, start=self.audio.position, gain=self.gain(other))

    def pair_playing(self) -> bool:
        pair = self.session.ab_pair
        return pair is not None and self.playing in pair and self.audio.playing

    def gain(self, take) -> float:
        if not self.match_loudness or self.session.ab_pair is None:
            return 1.0
        return matched_gain(self.store.audio(take), take.sample_rate)
