"""Loudness (ITU-R BS.1770-4). Of takes in memory, for listening (A/B and blind tests): both sounds
brought to one integrated loudness (pyloudnorm) so the louder one does not sound "better".

Of audio that never sits in memory whole (books): integrated loudness (LUFS) and
true peak (dBTP), fed block by block as a chapter is written. pyloudnorm measures a whole array; a
ten-hour book is 3.5 GB of float32, so the same K-weighting (pyloudnorm's own filter coefficients)
runs here with its state carried between blocks, and what gating needs is kept per 100 ms: the mean
square of each hop (36,000 numbers an hour). Agrees with pyloudnorm on whole arrays (tested).

The gain to a target is one number per book or per chapter, never per sentence (that would flatten
the reading's dynamics): the target's gain, lowered where it would lift the true peak over the ceiling."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal

BLOCK_HOPS = 4            # a 400 ms gating block is four 100 ms hops (75% overlap)
ABSOLUTE_GATE = -70.0     # LUFS
RELATIVE_GATE = -10.0     # LU below the absolutely gated loudness
OVERSAMPLE = 4            # true peak: BS.1770-4 annex 2 (4x at 48 kHz; Kazeia's 24 kHz gets 4x too)


class LoudnessMeter:
    """Integrated loudness and true peak of a mono signal fed in order (`add`), any block sizes."""

    def __init__(self, sample_rate: int):
        import pyloudnorm
        self.sample_rate = sample_rate
        self.hop = int(round(sample_rate * 0.1))
        # (pyloudnorm's K-weighting: a high shelf then a high pass, each scaled by its passband gain)
        self._stages = [(f.b, f.a, f.passband_gain, signal.lfilter_zi(f.b, f.a) * 0.0)
                        for f in pyloudnorm.Meter(sample_rate)._filters.values()]
        self._hops: list[float] = []          # mean square of each whole hop, K-weighted
        self._partial = np.zeros(0, np.float64)
        self._peak = TruePeak()
        self.samples = 0

    def add(self, audio: np.ndarray) -> None:
        x = np.asarray(audio, np.float64).reshape(-1)
        if not len(x):
            return
        self.samples += len(x)
        self._peak.add(x)
        stages = []
        for b, a, gain, state in self._stages:
            x, state = signal.lfilter(b, a, x, zi=state)
            x = gain * x
            stages.append((b, a, gain, state))
        self._stages = stages
        x = np.concatenate([self._partial, x])
        whole = len(x) // self.hop
        if whole:
            self._hops.extend(np.mean(np.square(x[:whole * self.hop].reshape(whole, self.hop)), axis=1).tolist())
        self._partial = x[whole * self.hop:]

    @property
    def hops(self) -> np.ndarray:
        """Mean square per whole 100 ms hop so far (what `integrated` gates)."""
        return np.asarray(self._hops, np.float64)

    @property
    def true_peak(self) -> float:
        """dBTP (-inf for silence)."""
        return self._peak.dbtp

    def integrated(self) -> float:
        return integrated_loudness([self.hops])


def integrated_loudness(hop_lists) -> float:
    """Gated integrated loudness (LUFS) of signals given as their hops' mean squares (one array per
    signal, e.g. per chapter: blocks never span two signals). -inf when nothing passes the gates
    (silence, or audio shorter than one 400 ms block)."""
    blocks = []
    for hops in hop_lists:
        hops = np.asarray(hops, np.float64)
        if len(hops) >= BLOCK_HOPS:
            blocks.append(np.convolve(hops, np.ones(BLOCK_HOPS) / BLOCK_HOPS, mode="valid"))
    if not blocks:
        return -math.inf
    z = np.concatenate(blocks)
    with np.errstate(divide="ignore"):
        level = -0.691 + 10 * np.log10(z)
    gated = z[level >= ABSOLUTE_GATE]
    if not len(gated):
        return -math.inf
    relative = -0.691 + 10 * math.log10(gated.mean()) + RELATIVE_GATE
    final = z[(level > relative) & (level >= ABSOLUTE_GATE)]
    return -0.691 + 10 * math.log10(final.mean()) if len(final) else -math.inf


class TruePeak:
    """The largest |sample| of the signal upsampled 4x (polyphase, scipy), fed in order: each sample is
    measured once the samples after it are known, with those before it, so the result is the whole
    signal's, not each block's (the interpolation filter reaches 10 input samples either side)."""
    CONTEXT = 32

    def __init__(self):
        self._before = np.zeros(0, np.float64)    # the last samples measured (context for the next)
        self._pending = np.zeros(0, np.float64)   # samples not measured yet
        self.peak = 0.0

    def add(self, x: np.ndarray) -> None:
        self._pending = np.concatenate([self._pending, np.asarray(x, np.float64).reshape(-1)])
        ready = len(self._pending) - self.CONTEXT
        if ready > 0:
            self.peak = max(self.peak, self._peak_of(self._pending, ready))
            done = np.concatenate([self._before, self._pending[:ready]])
            self._before, self._pending = done[-self.CONTEXT:], self._pending[ready:]

    def _peak_of(self, pending: np.ndarray, count: int) -> float:
        """The peak over pending[:count], upsampled with the context before and all of `pending` after."""
        up = signal.resample_poly(np.concatenate([self._before, pending]), OVERSAMPLE, 1)
        start = len(self._before) * OVERSAMPLE
        return float(np.max(np.abs(up[start:start + count * OVERSAMPLE])))

    @property
    def dbtp(self) -> float:
        peak = max(self.peak, self._peak_of(self._pending, len(self._pending))) if len(self._pending) else self.peak
        return 20 * math.log10(peak) if peak > 0 else -math.inf


@dataclass(frozen=True)
class LoudnessTarget:
    lufs: float = -20.0           # integrated loudness to reach (EBU R128: -23; audiobook stores: -18 to -20)
    ceiling_dbtp: float = -3.0    # true peak never above this (audiobook stores ask for -3 dBFS peaks)
    per: str = "book"             # "book": one gain for every chapter; "chapter": one gain each

    def validate(self) -> None:
        if not -60 <= self.lufs <= 0:
            raise ValueError(f"the loudness target must be from -60 to 0 LUFS, got {self.lufs!r}")
        if not -20 <= self.ceiling_dbtp <= 0:
            raise ValueError(f"the true-peak ceiling must be from -20 to 0 dBTP, got {self.ceiling_dbtp!r}")
        if self.per not in ("book", "chapter"):
            raise ValueError(f"loudness is set per 'book' or per 'chapter', got {self.per!r}")


def gain_db(loudness: float, true_peak: float, target: LoudnessTarget) -> tuple[float, str]:
    """(the gain in dB, a note when the target could not be met): the target's gain, lowered so the
    true peak stays under the ceiling; 0 for silence."""
    if not math.isfinite(loudness):
        return 0.0, "silent: left as it is"
    gain = target.lufs - loudness
    if math.isfinite(true_peak) and true_peak + gain > target.ceiling_dbtp:
        limited = target.ceiling_dbtp - true_peak
        return limited, (f"reaches {loudness + limited:.1f} LUFS, not {target.lufs:g}: its true peak "
                         f"({true_peak:.1f} dBTP) would pass the {target.ceiling_dbtp:g} dBTP ceiling")
    return gain, ""


# -- matching takes for listening ------------------------------------------------------------------
MATCH_LUFS = -23.0
MAX_MATCH_GAIN = 10.0


def loudness(audio: np.ndarray, sample_rate: int) -> float:
    """Integrated loudness in LUFS; RMS-based for clips shorter than the meter's 400 ms block."""
    audio = np.asarray(audio, np.float64)
    if len(audio) >= int(0.4 * sample_rate):
        import pyloudnorm
        value = pyloudnorm.Meter(sample_rate).integrated_loudness(audio)
        if np.isfinite(value):
            return float(value)
    rms = float(np.sqrt(np.mean(audio ** 2))) if len(audio) else 0.0
    return 20 * np.log10(rms) - 0.691 if rms > 0 else float("-inf")


def matched_gain(audio: np.ndarray, sample_rate: int, target: float = MATCH_LUFS) -> float:
    """The linear gain that brings `audio` to `target` LUFS (at most MAX_MATCH_GAIN; 1 for silence)."""
    level = loudness(audio, sample_rate)
    if not np.isfinite(level):
        return 1.0
    return float(min(MAX_MATCH_GAIN, 10 ** ((target - level) / 20)))
