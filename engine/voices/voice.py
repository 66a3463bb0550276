"""Voice cloning for Base models: reference audio -> x-vector (the native speaker encoder on the
reference's log-mel spectrogram) and, with its transcript, codes (the native audio encoder) -> a
reusable voice profile file (.kzvoice)."""
from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from kazeia import _native

from ..model_files.model_file import ModelFile
from ..synthesis.prompt import Voice
from ..synthesis.threads import default_threads
from .voice_profile import PROFILE_VERSION, read_profile, write_profile  # noqa: F401  (read and written there)

SAMPLE_RATE = 24000
MIN_SECONDS, MAX_SECONDS = 1.0, 60.0


@lru_cache(maxsize=4)
def slaney_mel_filters(sr: int = SAMPLE_RATE, n_fft: int = 1024, n_mels: int = 128, fmin: float = 0.0,
                       fmax: float = 12000.0) -> np.ndarray:
    """librosa's default mel filterbank (Slaney scale, Slaney area normalisation): [n_mels, n_fft/2+1]."""
    def hz_to_mel(f):
        f = np.asarray(f, np.float64)
        lin = f / (200.0 / 3)
        log_region = f >= 1000.0
        return np.where(log_region, 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0), lin)

    def mel_to_hz(m):
        m = np.asarray(m, np.float64)
        lin = m * (200.0 / 3)
        return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), lin)

    fft_freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights.astype(np.float32)


def log_mel(audio: np.ndarray) -> np.ndarray:
    """The reference's speaker-encoder features: reflect-pad 384, STFT 1024/256 (Hann, no centring),
    magnitude sqrt(re^2 + im^2 + 1e-9), Slaney mel (128, 0-12 kHz), log(max(., 1e-5)): [frames, 128]."""
    n_fft, hop = 1024, 256
    y = np.pad(np.asarray(audio, np.float32), (384, 384), mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(y, n_fft)[::hop]
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)).astype(np.float32)   # periodic Hann
    spec = np.fft.rfft(frames * window, axis=-1)
    mag = np.sqrt(spec.real.astype(np.float32) ** 2 + spec.imag.astype(np.float32) ** 2 + 1e-9)
    mel = mag.astype(np.float32) @ slaney_mel_filters().T
    return np.log(np.maximum(mel, 1e-5)).astype(np.float32)


def load_reference_audio(path: str | os.PathLike) -> np.ndarray:
    """Any format soundfile reads, any rate and channel count -> mono float32 at 24 kHz, checked."""
    import soundfile
    try:
        audio, sr = soundfile.read(path, dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as e:
        raise ValueError(f"{path}: cannot read audio ({e})") from None
    audio = audio.mean(axis=1)
    if sr != SAMPLE_RATE:
        import soxr
        audio = soxr.resample(audio, sr, SAMPLE_RATE, quality="VHQ").astype(np.float32)
    return check_reference_audio(trim_silence(audio), str(path))


def trim_silence(audio: np.ndarray, threshold: float = 1e-3, margin_s: float = 0.05) -> np.ndarray:
    """Drops leading and trailing 10 ms blocks quieter than `threshold` RMS (-60 dBFS), keeping a
    short margin; audio without silent edges is returned unchanged."""
    block = SAMPLE_RATE // 100
    n = len(audio) // block
    if n == 0:
        return audio
    rms = np.sqrt(np.mean(audio[:n * block].reshape(n, block) ** 2, axis=1))
    loud = np.flatnonzero(rms >= threshold)
    if len(loud) == 0:
        return audio   # all quiet: check_reference_audio says so
    margin = int(margin_s * SAMPLE_RATE)
    start = max(0, loud[0] * block - margin)
    end = min(len(audio), (loud[-1] + 1) * block + margin)
    if loud[-1] == n - 1:
        end = len(audio)   # the tail block is loud: keep everything after it
    return audio[start:end]


def check_reference_audio(audio: np.ndarray, name: str = "reference audio") -> np.ndarray:
    seconds = len(audio) / SAMPLE_RATE
    if seconds < MIN_SECONDS:
        raise ValueError(f"{name} is {seconds:.2f} s long; give at least {MIN_SECONDS:.0f} s of speech")
    if seconds > MAX_SECONDS:
        raise ValueError(f"{name} is {seconds:.0f} s long; at most {MAX_SECONDS:.0f} s (3-15 s of clean speech works best)")
    peak = float(np.abs(audio).max())
    if peak < 1e-3 or float(np.sqrt(np.mean(audio ** 2))) < 1e-4:
        raise ValueError(f"{name} is silent")
    if np.mean(np.abs(audio) >= 0.999) > 0.001:
        raise ValueError(f"{name} is clipped ({100 * np.mean(np.abs(audio) >= 0.999):.1f}% of samples at full scale)")
    return audio


def speaker_embedding(model: ModelFile, audio: np.ndarray, threads: int | None = None) -> np.ndarray:
    if model.info.variant != "base":
        raise ValueError(f"voice cloning needs a Base model; {model.info.path.name} is {model.info.variant}")
    encoder = _native.SpeakerEncoder(model.native, _native.ThreadPool(threads or default_threads()))
    return encoder.embed(log_mel(audio))


def model_identity(model: ModelFile) -> dict:
    hp = model.info.hparams
    return {"name": model.info.name, "variant": model.info.variant, "size": model.info.size,
            "hidden_size": hp["talker"]["hidden_size"]}


def reference_codes(model: ModelFile, audio: np.ndarray, threads: int | None = None) -> np.ndarray:
    """The audio encoder's codes [frames, 16] of 24 kHz reference audio (in-context cloning)."""
    if model.info.variant != "base":
        raise ValueError(f"voice cloning needs a Base model; {model.info.path.name} is {model.info.variant}")
    encoder = _native.AudioEncoder(model.native, _native.ThreadPool(threads or default_threads()))
    return encoder.encode(np.ascontiguousarray(audio, np.float32))


def create_voice(model: ModelFile, audio_path: str | os.PathLike, text: str | None = None,
                 threads: int | None = None) -> Voice:
    """A voice from reference audio: its x-vector, and with the transcript also its codes for
    in-context cloning (closer to the reference voice)."""
    return voice_from_audio(model, load_reference_audio(audio_path), text, threads)


def voice_from_audio(model: ModelFile, audio: np.ndarray, text: str | None = None, threads: int | None = None) -> Voice:
    """create_voice's work on reference audio already read (mono, 24 kHz, trimmed and checked)."""
    x_vector = speaker_embedding(model, audio, threads)
    if text and text.strip():
        return Voice(x_vector, reference_codes(model, audio, threads), text.strip())
    return Voice(x_vector)


def voice_digest(voice) -> str | None:
    """A Voice's identity for hashing (its vectors, codes and text): what decides how it sounds."""
    if voice is None:
        return None
    h = hashlib.sha256(np.ascontiguousarray(voice.x_vector, np.float32).tobytes())
    if voice.ref_codes is not None:
        h.update(np.ascontiguousarray(voice.ref_codes, np.int64).tobytes())
    h.update((voice.ref_text or "").encode())
    return h.hexdigest()[:16]


def save_voice(voice: Voice, path: str | os.PathLike, model: ModelFile, about: dict | None = None) -> Path:
    """The profile file; `about`: what the voice library knows of it (source, language, notes, tags...)."""
    meta = {"format": "kazeia-voice", "version": PROFILE_VERSION, "model": model_identity(model),
            "ref_text": voice.ref_text}
    if about:
        meta["about"] = about
    arrays = {"x_vector": np.asarray(voice.x_vector, np.float32)}
    if voice.ref_codes is not None:
        arrays["ref_codes"] = np.asarray(voice.ref_codes, np.int32)
    return write_profile(path, meta, arrays)


def voice_profile_info(path: str | os.PathLike) -> dict:
    """What a profile is without loading it for a model: kind (x-vector, or in-context with the
    reference's codes and transcript), the model it was made for, the transcript."""
    meta, arrays = read_profile(path)
    made_for = meta["model"]
    return {"kind": "in-context" if "ref_codes" in arrays else "x-vector", "model": made_for.get("name", "?"),
            "size": made_for.get("size", "?"), "transcript": meta.get("ref_text") or "",
            "about": meta.get("about") or {}}


def load_voice(path: str | os.PathLike, model: ModelFile) -> Voice:
    meta, arrays = read_profile(path)   # (checked whole: version, fields, shapes)
    x, codes = arrays["x_vector"], arrays.get("ref_codes")
    made_for, here = meta["model"], model_identity(model)
    if made_for["variant"] != "base" or made_for["hidden_size"] != here["hidden_size"] or made_for["size"] != here["size"]:
        raise ValueError(f"{path}: made for {made_for['name']} ({made_for['size']}), not {here['name']} ({here['size']})")
    return Voice(x, codes, meta.get("ref_text"))
