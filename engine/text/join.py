"""A long text's chunks and pauses joined into one take. At a join with no pause between the chunks
the two overlap in an equal-power crossfade (gains sin and cos: their squares sum to one, so the
power of uncorrelated audio holds through the join); around a pause each chunk fades out or in over
the same length before the silence, so nothing steps from speech to digital zero in one sample (a
click). Optionally each chunk's leading and trailing silence is trimmed first, by energy, keeping a
margin around the speech so soft onsets and decays are never cut.

Pieces are a chunk's audio (mono, any float dtype; joined as float32) or a pause in milliseconds.
Consecutive pauses add up; a pause of 0 ms still counts as a pause (the chunks fade out and in rather
than crossfade). An empty chunk (or one trimmed to nothing) holds its place and joins nothing: the
chunks on either side join as if it were not there. `join_offsets` gives each chunk's [start, end)
in the take, so a workbench can show where each chunk lies."""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Sequence

import numpy as np

from .limits import MAX_PAUSE_RUN_MS

Piece = np.ndarray | float | int   # a chunk's audio, or milliseconds of pause


@dataclass(frozen=True)
class JoinSettings:
    crossfade_ms: float = 5.0          # overlap (or fade) at every join
    trim_silence: bool = False         # trim each chunk's leading and trailing silence before joining
    # A 10 ms frame is silence when its mean power is this far below the mean power of the chunk's
    # loudest frame. Relative, not dBFS: a quietly rendered chunk trims like a loud one.
    trim_threshold_db: float = -45.0
    trim_keep_ms: float = 40.0         # kept on each side of the speech, so soft onsets and decays stay

    def validate(self) -> None:
        """ValueError naming the field, for a value no join could use (NaN fails every range)."""
        if not 0 <= self.crossfade_ms <= 1000:
            raise ValueError(f"crossfade_ms must be from 0 to 1000, got {self.crossfade_ms!r}")
        if not -120 <= self.trim_threshold_db < 0:
            raise ValueError(f"trim_threshold_db must be below 0 dB (relative to the loudest frame) and at "
                             f"least -120, got {self.trim_threshold_db!r}")
        if not 0 <= self.trim_keep_ms <= 10_000:
            raise ValueError(f"trim_keep_ms must be from 0 to 10000, got {self.trim_keep_ms!r}")


def _check_rate(sample_rate: int) -> None:
    if not (isinstance(sample_rate, Real) and sample_rate > 0 and math.isfinite(sample_rate)):
        raise ValueError(f"sample_rate must be a positive number, got {sample_rate!r}")


def _mono(audio, name: str) -> np.ndarray:
    """`audio` as a 1-D float32 array (a copy only if it must convert). (n, 1) and (1, n) are mono
    too; more channels are refused rather than interleaved into one."""
    audio = np.asarray(audio, np.float32)
    if audio.ndim > 1 and max(audio.shape) != audio.size:
        raise ValueError(f"{name} must be mono audio, got shape {audio.shape}")
    return audio.reshape(-1)


def speech_bounds(audio: np.ndarray, sample_rate: int, threshold_db: float, frame_ms: float = 10.0) -> tuple[int, int]:
    """[start, end) sample indices from the first to the last `frame_ms` frame whose mean power is
    above `threshold_db` (< 0) relative to the loudest frame of this audio; (0, 0) for all-silent or
    empty audio. A short last frame is measured over its own samples, not padded with zeros, and is
    not the reference."""
    _check_rate(sample_rate)
    if not -math.inf < threshold_db < 0:
        raise ValueError(f"threshold_db must be below 0 dB (relative to the loudest frame), got {threshold_db!r}")
    if not 0 < frame_ms < math.inf:
        raise ValueError(f"frame_ms must be positive, got {frame_ms!r}")
    audio = _mono(audio, "audio")
    frame = max(1, int(round(sample_rate * frame_ms / 1000)))
    if len(audio) == 0:
        return 0, 0
    firsts = np.arange(0, len(audio), frame)
    power = audio.astype(np.float64) ** 2
    energy = np.add.reduceat(power, firsts) / np.diff(np.append(firsts, len(audio)))
    # the reference is the loudest whole frame: a few samples left over at the end could be one peak,
    # far above any frame's mean, and would lift the threshold over quiet speech
    whole = len(audio) // frame
    loudest = energy[:whole].max() if whole else energy.max()
    if loudest <= 0:
        return 0, 0
    loud = np.flatnonzero(energy > loudest * 10 ** (threshold_db / 10))
    return int(loud[0] * frame), int(min(len(audio), (loud[-1] + 1) * frame))


def trim(audio: np.ndarray, sample_rate: int, settings: JoinSettings) -> np.ndarray:
    """`audio` less its leading and trailing silence: `trim_keep_ms` is kept on each side of
    `speech_bounds` (clamped to the array), so no sample of the speech span is ever cut. A new
    float32 array (never a view of `audio`); all-silent audio gives an empty one."""
    settings.validate()
    audio = _mono(audio, "audio")
    start, end = speech_bounds(audio, sample_rate, settings.trim_threshold_db)
    if end <= start:
        return np.zeros(0, np.float32)
    keep = int(round(sample_rate * settings.trim_keep_ms / 1000))
    return audio[max(0, start - keep):min(len(audio), end + keep)].copy()


def _ramp(n: int) -> np.ndarray:
    """Quarter-sine gains 0 -> 1 over n samples (their cosine partners fall 1 -> 0)."""
    return np.sin(0.5 * np.pi * (np.arange(n, dtype=np.float64) + 0.5) / n).astype(np.float32)


def _layout(pieces: Sequence[Piece], sample_rate: int, settings: JoinSettings):
    """The chunks (trimmed if asked) and, per chunk: its start in the take, and whether a pause (or
    the take's edge) comes before and after it; and the take's length."""
    settings.validate()
    _check_rate(sample_rate)
    fade = int(round(sample_rate * settings.crossfade_ms / 1000))
    chunks, starts, pause_before, pause_after = [], [], [], []
    position, pending_pause, previous = 0, None, None   # previous: the index of the last chunk with audio
    for index, piece in enumerate(pieces):
        if isinstance(piece, np.ndarray):
            audio = _mono(piece, f"pieces[{index}]")
            if settings.trim_silence:
                audio = trim(audio, sample_rate, settings)
            chunks.append(audio)
            pause_after.append(True)
            if not len(audio):   # (all silence, trimmed away): holds its place, joins nothing
                starts.append(position + int(round(sample_rate * (pending_pause or 0.0) / 1000)))
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
            if isinstance(piece, bool) or not isinstance(piece, Real):   # (True is an int, not a pause)
                raise ValueError(f"pieces[{index}] must be audio (an ndarray) or a pause in ms, got {piece!r}")
            ms = float(piece)
            if not 0 <= ms <= MAX_PAUSE_RUN_MS:
                raise ValueError(f"pieces[{index}]: a pause must be from 0 to {MAX_PAUSE_RUN_MS:.0f} ms, got {piece!r}")
            pending_pause = (pending_pause or 0.0) + ms
    if pending_pause:
        position += int(round(sample_rate * pending_pause / 1000))
    return chunks, starts, pause_before, pause_after, position, fade


def join(pieces: Sequence[Piece], sample_rate: int, settings: JoinSettings = JoinSettings()) -> np.ndarray:
    """One take (float32) from chunks and pauses, in order; inputs are not changed. Its length is
    the chunks' lengths (after any trim) less each crossfade's overlap, min(crossfade, len(a),
    len(b)), plus the pauses' samples (each run of pauses rounded once). The take's own first and
    last samples are not faded (nothing is there to click against) unless a pause leads or trails."""
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
    """[start, end) of each chunk (each ndarray piece, in order; pauses have none) in the take `join`
    makes of the same pieces (the workbench shows chunk boundaries from these). Crossfaded chunks'
    spans overlap by the crossfade; an empty chunk gets an empty span where it would have started
    (after the chunk before it and any pause between, without an overlap)."""
    chunks, starts, *_ = _layout(pieces, sample_rate, settings)
    return [(s, s + len(a)) for a, s in zip(chunks, starts)]


class TakeAssembler:
    """`join` for pieces that arrive in order, a chunk's audio in parts (a stream's frames): each call
    returns the samples of the take that nothing still to come can change, and all of them together
    are exactly `join` of the same pieces (tested bit for bit). What waits: a chunk's last
    `crossfade_ms` (its fade depends on what follows), its first ones until it is that long (a
    crossfade is as long as the shorter chunk), and with `trim_silence` the whole chunk (its edges
    are known at its end)."""

    def __init__(self, sample_rate: int, settings: JoinSettings = JoinSettings()):
        settings.validate()
        _check_rate(sample_rate)
        self.sample_rate, self.settings = sample_rate, settings
        self.fade = int(round(sample_rate * settings.crossfade_ms / 1000))
        self._stage = np.zeros(0, np.float32)   # the take from `_emitted` on: contributions so far
        self._emitted = 0
        self._pause: float | None = None        # ms of pause since the last chunk with audio
        self._last_end: int | None = None       # where the last chunk with audio ends in the take
        self._held = None                       # its end, not yet added: (start, samples, head gains)
        self._chunk: list[np.ndarray] | None = None   # the chunk in progress
        self._start = self._head = self._placed = 0  # its start, head fade (-1: not placed), samples added
        self.spans: list[tuple[int, int]] = []   # each ended chunk's [start, end) in the take (join_offsets')

    # -- pieces ---------------------------------------------------------------------------------
    def pause(self, ms: float) -> np.ndarray:
        if self._chunk is not None:
            raise ValueError("a pause inside a chunk: end the chunk first")
        if isinstance(ms, bool) or not isinstance(ms, Real) or not 0 <= float(ms) <= MAX_PAUSE_RUN_MS:
            raise ValueError(f"a pause must be from 0 to {MAX_PAUSE_RUN_MS:.0f} ms, got {ms!r}")
        self._pause = (self._pause or 0.0) + float(ms)
        return np.zeros(0, np.float32)

    def audio(self, samples: np.ndarray) -> np.ndarray:
        """More of the chunk in progress (the first call begins it)."""
        if self._chunk is None:
            self._chunk, self._head, self._placed = [], -1, 0
        self._chunk.append(_mono(samples, "samples"))
        if self.settings.trim_silence:
            return np.zeros(0, np.float32)
        return self._advance(final=False)

    def end_chunk(self) -> np.ndarray:
        if self._chunk is not None and self.settings.trim_silence:
            self._chunk = [trim(np.concatenate(self._chunk), self.sample_rate, self.settings)]
        if self._chunk is None or not sum(len(a) for a in self._chunk):
            # a chunk with no audio holds its place and joins nothing: an empty span where it would start
            pause = int(round(self.sample_rate * self._pause / 1000)) if self._pause else 0
            at = (self._last_end if self._last_end is not None else 0) + pause
            self.spans.append((at, at))
            self._chunk = None
            return np.zeros(0, np.float32)
        out = self._advance(final=True)
        self.spans.append((self._start, self._start + len(self._chunk[0])))
        self._chunk = None
        return out

    def finish(self) -> np.ndarray:
        """The rest of the take: the last chunk's end and any pause after it."""
        if self._chunk is not None:
            raise ValueError("the last chunk has not ended")
        trailing = int(round(self.sample_rate * self._pause / 1000)) if self._pause else 0
        if self._held is not None:   # the take's last chunk fades out only into a pause
            self._add_held(len(self._held[1]) if trailing else 0)
        end = max(self._last_end or 0, self._emitted + len(self._stage)) + trailing
        self._pause = None
        self._grow(end)
        return self._release(end)

    # -- inside ---------------------------------------------------------------------------------
    def _advance(self, final: bool) -> np.ndarray:
        audio = np.concatenate(self._chunk) if len(self._chunk) > 1 else self._chunk[0]
        self._chunk = [audio]
        n = len(audio)
        if n == 0:
            return np.zeros(0, np.float32)
        if self._head < 0:   # placed once its head's length is known
            if n < self.fade and not final:
                return np.zeros(0, np.float32)
            self._place(min(self.fade, n))
        end = n - min(self.fade, n) if final else n - self.fade   # the last `fade` samples wait
        if end > self._placed:
            gain = self._head_gain(n)
            self._add(self._start + self._placed, audio[self._placed:end] * gain[self._placed:end])
            self._placed = end
        if final:
            self._held = (self._start + end, audio[end:].copy(), self._head_gain(n)[end:])
            self._last_end = self._start + n
        return self._release(self._final_until())

    def _place(self, head_room: int) -> None:
        """Where the chunk starts and how long its head fades, from what came before it."""
        pause = int(round(self.sample_rate * self._pause / 1000)) if self._pause else 0
        if self._last_end is None:   # the take's first chunk, after any leading pause
            self._start = self._emitted + len(self._stage) + pause
            self._head = head_room if self._start > 0 else 0
        elif self._pause is not None:   # after a pause: the last chunk fades out, this one fades in
            self._add_held(len(self._held[1]))
            self._start, self._head = self._last_end + pause, head_room
        else:   # straight after a chunk: an equal-power crossfade, as long as the shorter allows
            overlap = min(head_room, len(self._held[1]))
            self._add_held(overlap)
            self._start, self._head = self._last_end - overlap, overlap
        self._pause = None
        self._grow(self._start)

    def _head_gain(self, n: int) -> np.ndarray:
        gain = np.ones(n, np.float32)   # (built as join builds it: the same float32 products)
        if self._head:
            gain[:self._head] *= _ramp(self._head)
        return gain

    def _add_held(self, fade_out: int) -> None:
        """The last chunk's held end, its last `fade_out` samples fading (0: as it is)."""
        start, samples, gain = self._held
        if fade_out:
            gain[len(gain) - fade_out:] *= _ramp(fade_out)[::-1]
        self._add(start, samples * gain)
        self._held = None

    def _add(self, start: int, values: np.ndarray) -> None:
        self._grow(start + len(values))
        at = start - self._emitted
        self._stage[at:at + len(values)] += values

    def _final_until(self) -> int:
        """The first sample a piece still to come may add to."""
        if self._held is not None:
            return self._held[0]
        if self._chunk is not None and self._head >= 0:
            return self._start + self._placed
        return self._emitted + len(self._stage)

    def _grow(self, until: int) -> None:
        need = until - self._emitted - len(self._stage)
        if need > 0:
            self._stage = np.concatenate([self._stage, np.zeros(need, np.float32)])

    def _release(self, until: int) -> np.ndarray:
        n = max(0, until - self._emitted)
        out, self._stage = self._stage[:n].copy(), self._stage[n:]
        self._emitted += n
        return out
