"""Writing audio files (soundfile/libsndfile)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import soundfile

from .atomic import atomic_path

FORMATS = {".wav": ("WAV", "FLOAT"), ".flac": ("FLAC", "PCM_24")}


def write_audio(path: str | os.PathLike, audio: np.ndarray, sample_rate: int) -> Path:
    """WAV (32-bit float) or FLAC (24-bit) by extension; written next to the target and renamed,
    so a failure never leaves a half-written file under the user's name."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: unsupported audio format (use {', '.join(FORMATS)})")
    with atomic_path(path) as partial:
        soundfile.write(partial, np.asarray(audio, np.float32), sample_rate, format=fmt[0], subtype=fmt[1])
    return path
