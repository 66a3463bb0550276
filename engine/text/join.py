"""A long text's chunks and pauses joined into one take. At a join with no pause between the chunks
the two overlap in an equal-power crossfade (gains sin and cos: their squares sum to one, so the
power of uncorrelated audio holds through the join); around a pause each chunk fades out or in over
the same length before the silence, so nothing steps from speech to digital zero in one sample (a
click). Optionally each chunk's leading and trailing silence is trimmed first, by energy, keeping a
margin around the speech so soft onsets and decays are never cut."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

Piece = np.ndarray | float | int   # a chunk's audio, or milliseconds of pause


@dataclass(frozen=True)
class JoinSettings:
    crossfade_ms: float = 5.0          # overlap (or fade) at every join
    trim_silence: bool = False
    trim_threshold_db: float = -45.0   # a 10 ms frame is silence below this, relative to the loudest frame
    trim_keep_ms: float = 40.0         # kept on each side of the speech

    def validate(self) -> None:
        if not 0 <= self.crossfade_ms <= 1000:
            raise ValueError(f"crossfade_ms must be from 0 to 1000, got {self.crossfade_ms!r}")
        if not -120 <= self.trim_threshold_db < 0:
            raise ValueError(f"trim_threshold_db must be below 0 dB (relative to the loudest frame) and at "
                             f"least -120, got {self.trim_threshold_db!r}")
        if not 0 <= self.trim_keep_ms <= 10_000:
            raise ValueError(f"trim_keep_ms must be from 0 to 10000, got {self.trim_keep_ms!r}")


def speech_bounds(audio: np.ndarray, sample_rate: int, threshold_db: float, frame_ms: float = 10.0) -> tuple[int, int]:
    """[start, end) from the first to the last frame louder than `threshold_db` below the loudest
    frame; (0, 0) for silence or nothing."""
    audio = np.asarray(audio, np.float32)
    frame = max(1, int(round(sample_rate * frame_ms / 1000)))
    n = -(-len(audio) // frame)
    if n == 0:
        return 0, 0
    padded = np.zeros(n * frame, np.float64)
    padded[:len(audio)] = audio
    energy = np.mean(padded.reshape(n, frame) ** 2, axis=1)
    loudest = energy.max()
    if loudest <= 0:
        return 0, 0
    loud = np.flatnonzero(energy > loudest * 10 ** (threshold_db / 10))
    return int(loud[0] * frame), int(min(len(audio), (loud[-1] + 1) * frame))


def trim(audio: np.ndarray, sample_rate: int, settings: JoinSettings) -> np.ndarray:
    """`audio` less its leading and trailing silence, `trim_keep_ms` kept around the speech."""
    start, end = speech_bounds(audio, sample_rate, settings.trim_threshold_db)
    if end <= start:
        return np.zeros(0, np.float32)
    keep = int(round(sample_rate * settings.trim_keep_ms / 1000))
    return np.asarray(audio[max(0, start - keep):min(len(audio), end + keep)], np.float32)


def _ramp(n: int) -> np.ndarray:
    """Quarter-sine gains 0 -> 1 over n samples (their cosine partners fall 1 -> 0)."""
    return np.sin(0.5 * np.pi * (np.arange(n, dtype=np.float64) + 0.5) / n).astype(np.float32)


def _layout(pieces: Sequence[Piece], sample_rate: int, settings: JoinSettings):
    """The chunks (trimmed if asked) and, per chunk: its start in the take, and whether a pause (or
    the take's edge) comes before and after it; and the take's length."""
    settings.validate()
    fade = int(round(sample_rate * settings.crossfade_ms / 1000))
    chunks, starts, pause_before, pause_after = [], [], [], []
    position, pending_pause, previous = 0, None, None   # previous: the index of the last chunk with audio
    for piece in pieces:
        if isinstance(piece, np.ndarray):
            audio = np.asarray(piece, np.float32).reshape(-1)
            if settings.trim_silence:
                audio = trim(audio, sample_rate, settings)
            chunks.append(audio)
            pause_after.append(True)
            if not len(audio):   # (all silence, trimmed away): holds its place, joins nothing
                starts.append(position)
                pause_before.append(True)
                continue
            if previous is not None and pending_pause is None:   # straight after a chunk: overlap
                position -= min(fade, len(chunks[previous]), len(audio))
            else:
                position += int(round(sample_rate * (pending_pause or 0.0) / 1000))
            pause_before.append(previous is None or pending_pause is not None)
            if previous is not None:
                pause_after[previous] = pending_pause is not None
            starts.append(position)
            position += len(audio)
            previous, pending_pause = len(chunks) - 1, None
        else:
            ms = float(piece)
            if not 0 <= ms <= 600_000:
                raise ValueError(f"a pause must be from 0 to 600000 ms, got {ms!r}")
            pending_pause = (pending_pause or 0.0) + ms
    if pending_pause:
        position += int(round(sample_rate * pending_pause / 1000))
    return chunks, starts, pause_before, pause_after, position, fade


def join(pieces: Sequence[Piece], sample_rate: int, settings: JoinSettings = JoinSettings()) -> np.ndarray:
    """One take (float32) from chunks and pauses, in order; inputs are not changed."""
    chunks, starts, before, after, length, fade = _layout(pieces, sample_rate, settings)
    out = np.zeros(length, np.float32)
    with_audio = [i for i, a in enumerate(chunks) if len(a)]
    for k, i in enumerate(with_audio):
        audio, start = chunks[i], starts[i]
        gain = np.ones(len(audio), np.float32)
        # the head: a fade in from silence, or the rising half of a crossfade with the chunk before
        head = min(fade, len(audio)) if before[i] else min(fade, len(audio), len(chunks[with_audio[k - 1]]))
        if head and (k > 0 or start > 0):
            gain[:head] *= _ramp(head)
        # the tail: a fade out into silence, or the falling half of the crossfade with the next chunk
        tail = min(fade, len(audio)) if after[i] else min(fade, len(audio), len(chunks[with_audio[k + 1]]))
        if tail and (k < len(with_audio) - 1 or start + len(audio) < length):
            gain[len(audio) - tail:] *= _ramp(tail)[::-1]
        out[start:start + len(audio)] += audio * gain
    return out


def join_offsets(pieces: Sequence[Piece], sample_rate: int,
                 settings: JoinSettings = JoinSettings()) -> list[tuple[int, int]]:
    """[start, end) of each chunk in the take `join` makes of the same pieces (the workbench shows
    chunk boundaries from these)."""
    chunks, starts, *_ = _layout(pieces, sample_rate, settings)
    return [(s, s + len(a)) for a, s in zip(chunks, starts)]
