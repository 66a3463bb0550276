"""A voice kept from a take: the voice a VoiceDesign description (or a CustomVoice speaker, or any
recording) produced, made into a voice profile with a Base model's encoders (its x-vector, and with the
take's text its codes for in-context cloning), so the same voice speaks any new text on that Base model.

A profile belongs to one Base model size (its speaker encoder and talker), so a take is kept once per
Base model size asked for. The take is read as `kazeia voice create` reads a recording (mono, 24 kHz,
silent edges trimmed, checked), so a kept voice equals the profile made from the same audio and text;
a long take is cut at a chunk's end to at most KEEP_SECONDS (a reference of 3-20 s clones best)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .voice import SAMPLE_RATE, check_reference_audio, trim_silence

KEEP_SECONDS = 20.0


@dataclass
class TakeReference:
    """What a take gives a voice: its audio, what it says, and where it came from."""
    audio: np.ndarray              # mono float32 at 24 kHz, trimmed and checked
    text: str                      # what the audio says (the transcript for in-context cloning; "" if unknown)
    source: str                    # designed | custom voice | take | recording
    origin: dict = field(default_factory=dict)   # the take's text, model, voice, seed
    language: str = ""


def _spoken_text(record: dict) -> str:
    """What a take's audio says: its chunks' texts (markup gone), else its text."""
    chunks = record.get("chunks") or []
    if chunks:
        return " ".join(" ".join(str(c.get("text", "")).split()) for c in chunks).strip()
    return " ".join(str(record.get("text", "")).split())


def _source(request: dict) -> str:
    if request.get("instruct"):
        return "designed"
    if request.get("speaker"):
        return "custom voice"
    return "take"


def reference_from_take(audio: np.ndarray, sample_rate: int, record: dict | None = None,
                        name: str = "the take") -> TakeReference:
    """A take's audio and record (the workbench's take record, or the parameters Kazeia embedded in a
    file) as a reference: a long take cut at the last chunk that ends by KEEP_SECONDS."""
    record = record or {}
    audio = np.asarray(audio, np.float32)
    if audio.ndim == 2:
        audio = audio.mean(axis=1)
    if sample_rate != SAMPLE_RATE:
        import soxr
        audio = soxr.resample(audio, sample_rate, SAMPLE_RATE, quality="VHQ").astype(np.float32)
    text = _spoken_text(record)
    chunks = record.get("chunks") or []
    if len(audio) > KEEP_SECONDS * SAMPLE_RATE and chunks:
        kept = [c for c in chunks if c.get("span") and c["span"][1] * SAMPLE_RATE / sample_rate <= KEEP_SECONDS * SAMPLE_RATE]
        if not kept:
            kept = chunks[:1]
        end = int(kept[-1]["span"][1] * SAMPLE_RATE / sample_rate)
        audio = audio[:end]
        text = " ".join(" ".join(str(c.get("text", "")).split()) for c in kept).strip()
    request = record.get("request") or {}
    origin = {k: v for k, v in (("text", record.get("text")), ("model", Path(str(record.get("model", ""))).name),
                                ("speaker", request.get("speaker")), ("instruct", request.get("instruct")),
                                ("seed", (record.get("sampling") or {}).get("seed")), ("take", record.get("id")))
              if v not in (None, "")}
    audio = check_reference_audio(trim_silence(audio), name)
    return TakeReference(audio, text, _source(request) if record else "recording", origin,
                         str(request.get("language") or "") if request.get("language") not in (None, "auto") else "")


def read_take(spec: str, takes_folder: str | os.PathLike | None = None) -> TakeReference:
    """`--from-take`: an audio file (with the parameters Kazeia embeds, or a .json beside it: the text
    comes from there), or a workbench take by its id or name."""
    import soundfile

    from ..audio_io import read_params
    from ..takes.take_record import check_record, read_index, read_record
    from ..user_dirs import data_dir
    path = Path(spec).expanduser()
    if path.is_file():
        try:
            audio, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        except (RuntimeError, soundfile.LibsndfileError) as e:
            raise ValueError(f"{path}: cannot read audio ({e})") from None
        # the record beside it, else the one embedded: each checked (a damaged one is refused, named)
        sidecar = path.with_suffix(path.suffix + ".json")
        if sidecar.is_file():
            record = read_record(sidecar)
        else:
            record = read_params(path) or {}
            check_record(record, f"{path}: the parameters it carries", partial=True)
        return reference_from_take(audio.mean(axis=1), rate, record, str(path))
    folder = Path(takes_folder) if takes_folder is not None else data_dir() / "takes"
    index = folder / "index.json"
    records = read_index(index) if index.is_file() else []
    match = [(i, r) for i, r in enumerate(records) if isinstance(r, dict) and spec in (r.get("id"), r.get("name"))]
    if not match:
        raise ValueError(f"--from-take {spec}: no such audio file, and no workbench take with that id or name "
                         f"in {folder}")
    i, record = match[-1]
    check_record(record, f"{index}: takes[{i}]")   # (its id names the audio file: a plain stem, checked)
    try:
        audio, rate = soundfile.read(str(folder / f"{record['id']}.wav"), dtype="float32")
    except (RuntimeError, soundfile.LibsndfileError) as e:
        raise ValueError(f"--from-take {spec}: cannot read its audio ({e})") from None
    return reference_from_take(audio, rate, record, f"take {spec}")


def keep_voice(reference: TakeReference, base_models: list, library, name: str, threads: int | None = None,
               text: str | None = None, about: dict | None = None) -> list[str]:
    """One profile per Base model given (one per size: a profile speaks on Base models of its size),
    named `name` (with the size added when there are several); `about`: notes, tags... to keep with
    it. Returns the names kept."""
    from .voice import voice_from_audio
    if not base_models:
        raise ValueError("keeping a voice needs a Base model (0.6B or 1.7B): kazeia pull base-0.6b, or give --model")
    sizes = {}
    for model in base_models:
        if model.info.variant != "base":
            raise ValueError(f"{model.info.path.name} is a {model.info.variant} model: a voice is kept with a Base model")
        sizes.setdefault(model.info.size, model)   # (one per size)
    transcript = reference.text if text is None else text
    names = []
    for size, model in sizes.items():
        voice = voice_from_audio(model, reference.audio, transcript or None, threads)
        kept = {"source": reference.source, "language": reference.language, "created": time.time(),
                "origin": reference.origin, **{k: v for k, v in (about or {}).items() if v}}
        names.append(library.add(voice, model, name if len(sizes) == 1 else f"{name} {size}", kept))
    return names


def speaker_similarity(model, a: np.ndarray, b: np.ndarray, threads: int | None = None) -> float:
    """Cosine of two recordings' x-vectors by a Base model's speaker encoder (1: the same voice to it)."""
    from .voice import speaker_embedding
    x, y = speaker_embedding(model, a, threads), speaker_embedding(model, b, threads)
    return float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))
