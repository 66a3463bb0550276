"""Loudness matching for A/B listening (ITU-R BS.1770 via pyloudnorm): both takes are brought to
the same integrated loudness so the louder one does not sound "better"."""
from __future__ import annotations

import numpy as np

TARGET_LUFS = -23.0
MAX_GAIN = 10.0


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


def matched_gain(audio: np.ndarray, sample_rate: int, target: float = TARGET_LUFS) -> float:
    level = loudness(audio, sample_rate)
    if not np.isfinite(level):
        return 1.0
    return float(min(MAX_GAIN, 10 ** ((target - level) / 20)))
