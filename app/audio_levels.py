"""What reaches the speakers: master volume, a peak limiter (nothing above the ceiling, ~-0.2 dBFS,
ever reaches the device) and the level figures the meter shows. Pure numpy, no Qt."""
from __future__ import annotations

import numpy as np

CEILING = 0.977        # -0.2 dBFS
RELEASE_DB_PER_S = 6.0  # how fast a limited stream comes back up
FLOOR_DB = -90.0


def dbfs(value: float) -> float:
    return 20 * float(np.log10(value)) if value > 0 else FLOOR_DB


class OutputLevel:
    """Volume then limiting, chunk by chunk for streams (gain drops at once, recovers slowly) or a
    whole take at once. `limited_db` says how much the last audio was turned down."""

    def __init__(self, sample_rate: int = 24000, volume: float = 1.0):
        self.sample_rate = sample_rate
        self.volume = volume
        self._gain = 1.0
        self.limited_db = 0.0

    def reset(self) -> None:
        self._gain = 1.0
        self.limited_db = 0.0

    def process(self, audio: np.ndarray) -> np.ndarray:
        """A copy of `audio` with volume and limiter applied; every sample within +-CEILING."""
        out = np.asarray(audio, np.float32) * np.float32(self.volume)
        if not len(out):
            return out
        peak = float(np.max(np.abs(out)))
        recover = 10 ** (RELEASE_DB_PER_S * len(out) / self.sample_rate / 20)
        self._gain = min(1.0, self._gain * recover)
        if peak * self._gain > CEILING:
            self._gain = CEILING / peak
        self.limited_db = -dbfs(self._gain) if self._gain < 1.0 else 0.0
        if self._gain < 1.0:
            out *= np.float32(self._gain)
        return np.clip(out, -CEILING, CEILING, out=out)   # (float rounding of the gain above)


def level_of(audio: np.ndarray) -> tuple[float, float]:
    """(peak dBFS, RMS dBFS) of a block."""
    if not len(audio):
        return FLOOR_DB, FLOOR_DB
    a = np.asarray(audio, np.float64)
    return dbfs(float(np.max(np.abs(a)))), dbfs(float(np.sqrt(np.mean(a * a))))
