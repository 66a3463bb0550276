"""Export takes as WAV (float or 16-bit) or FLAC, parameters in a JSON sidecar and in the file's
own metadata; a long take also with its subtitles (SRT and WebVTT, a cue per chunk where it lies in the
take); several takes at once with a naming pattern. Nothing is left half-written."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from kazeia.engine.atomic import atomic_write_text
from kazeia.engine.audio_io import write_audio

from .takes import Take

FORMATS = {"wav-float": ("WAV", "FLOAT", ".wav"), "wav-16": ("WAV", "PCM_16", ".wav"), "flac": ("FLAC", "PCM_24", ".flac")}


def file_name(take: Take, pattern: str, index: int) -> str:
    """Pattern fields: {index} {id} {name} {speaker} {seed} {text}."""
    text = re.sub(r"[^\w-]+", "_", take.text[:32]).strip("_") or "take"
    fields = {"index": f"{index:03d}", "id": take.id, "name": take.name or text, "speaker": take.request.get("speaker") or "",
              "seed": take.sampling.get("seed", ""), "text": text}
    return re.sub(r"[/\\]", "_", pattern.format(**fields))


def export_take(take: Take, audio: np.ndarray, path: Path, fmt: str = "wav-float") -> Path:
    _, subtype, ext = FORMATS[fmt]
    path = Path(path)
    if path.suffix.lower() != ext:
        path = path.with_suffix(ext)
    params = take.to_json()
    write_audio(path, audio, take.sample_rate, subtype=subtype, title=take.name or take.text, params=params)
    atomic_write_text(path.with_suffix(path.suffix + ".json"), json.dumps(params, indent=1))   # the whole record
    if take.chunks:
        from kazeia.engine.long_take.assemble import Cue
        from kazeia.engine.long_take.subtitles import write_subtitles
        cues = [Cue(c["span"][0], c["span"][1], " ".join(c["written"].split()), c["index"]) for c in take.chunks]
        for kind in ("srt", "vtt"):
            write_subtitles(path.with_suffix(f".{kind}"), cues, take.sample_rate)
    return path


def export_takes(takes: list[tuple[Take, np.ndarray]], folder: Path, pattern: str = "{index}_{name}",
                 fmt: str = "wav-float") -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return [export_take(t, a, folder / file_name(t, pattern, i + 1), fmt) for i, (t, a) in enumerate(takes)]
