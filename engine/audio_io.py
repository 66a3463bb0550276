"""Writing audio files (soundfile/libsndfile), whole or not at all, optionally with the parameters
that made them embedded (title, software, and a JSON comment)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import soundfile

from .atomic import atomic_path
from .untrusted import loads

MAX_PARAMS_BYTES = 1 << 20   # (a take's settings: a few kB)

FORMATS = {".wav": ("WAV", "FLOAT"), ".flac": ("FLAC", "PCM_24")}
# named formats for renders and exports: extension, container, sample type
NAMED_FORMATS = {"wav": (".wav", "WAV", "FLOAT"), "wav16": (".wav", "WAV", "PCM_16"), "flac": (".flac", "FLAC", "PCM_24")}


SFC_SET_ADD_PEAK_CHUNK = 0x1050   # libsndfile's sf_command


def reproducible(f: soundfile.SoundFile) -> soundfile.SoundFile:
    """`f` (just opened for writing) without the PEAK chunk libsndfile adds to float WAV files: it
    holds the time of writing, so two writes of the same audio would differ in bytes (a resumed
    book against one run). Through soundfile's libsndfile handle: soundfile has no call for it."""
    if f.format in ("WAV", "WAVEX", "RF64") and f.subtype in ("FLOAT", "DOUBLE"):
        soundfile._snd.sf_command(f._file, SFC_SET_ADD_PEAK_CHUNK, soundfile._ffi.NULL, 0)
    return f


def write_audio(path: str | os.PathLike, audio: np.ndarray, sample_rate: int, subtype: str | None = None,
                title: str | None = None, params: dict | None = None) -> Path:
    """WAV (32-bit float, or `subtype`) or FLAC (24-bit) by extension; written next to the target
    and renamed, so a failure never leaves a half-written file under the user's name. `params` go
    into the file's comment as JSON (cut at 4000 characters: keep a sidecar for more)."""
    path = Path(path)
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ValueError(f"{path}: unsupported audio format (use {', '.join(FORMATS)})")
    with atomic_path(path) as partial, soundfile.SoundFile(partial, "w", sample_rate, 1, format=fmt[0],
                                                           subtype=subtype or fmt[1]) as f:
        reproducible(f)
        if title:
            f.title = title[:200]
        if params is not None:
            f.software = "Kazeia"
            f.comment = json.dumps(params, ensure_ascii=False)[:4000]
        f.write(np.asarray(audio, np.float32))
    return path


def read_params(path: str | os.PathLike) -> dict | None:
    """The parameters write_audio embedded, or None (a file from elsewhere may carry anything there:
    a comment that is not a bounded JSON object is no parameters)."""
    try:
        with soundfile.SoundFile(path) as f:
            params = loads(f.comment, f"{path}'s comment", MAX_PARAMS_BYTES, nan=True) if f.comment else None
    except (RuntimeError, ValueError, soundfile.LibsndfileError):
        return None
    return params if isinstance(params, dict) else None
