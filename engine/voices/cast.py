"""The voices a text may name ([voice=NAME], dialogue turns): the model's own speakers, and a cast
file that maps names to a speaker, a voice description or a voice profile:

    [Alice]
    speaker = "vivian"
    [Narrator]
    instruct = "A calm, low voice, reading slowly."
    [Me]
    profile = "me.kzvoice"        # relative to the cast file

Every mistake is a ValueError naming the file and the name."""
from __future__ import annotations

import tomllib
from pathlib import Path

from ..model_files.model_file import ModelFile
from ..untrusted import read_text
from ..text.compose import Cast

MAX_CAST_BYTES = 1 << 20   # (a cast is a page of names)
_KEYS = {"speaker", "instruct", "profile"}


def model_cast(model: ModelFile) -> dict[str, Cast]:
    """Each of the model's speakers under its own name."""
    return {s.name: Cast(speaker=s.name) for s in model.info.speakers}


def load_cast(path: str | Path, model: ModelFile) -> dict[str, Cast]:
    """The model's speakers, then the file's names (which take their place where both have one)."""
    path = Path(path)
    try:
        table = tomllib.loads(read_text(path, MAX_CAST_BYTES, f"cast {path}"))
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"cast {path}: not valid TOML ({e})") from None
    except RecursionError:   # (tomllib nests without bound: `a=[[[[...`)
        raise ValueError(f"cast {path}: nested too deeply") from None
    except OSError as e:
        raise ValueError(f"cast {path}: cannot read it ({e.strerror})") from None
    cast = model_cast(model)
    speakers = {s.name.casefold(): s.name for s in model.info.speakers}
    for name, entry in table.items():
        where = f"cast {path}, [{name}]"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: a name needs a table of speaker / instruct / profile, got {entry!r}")
        unknown = set(entry) - _KEYS
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; use {', '.join(sorted(_KEYS))}")
        if not entry:
            raise ValueError(f"{where}: says nothing; give it a speaker, an instruct or a profile")
        for key, value in entry.items():
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{where}: {key} must be non-empty text")
        speaker = entry.get("speaker")
        if speaker is not None:
            if speaker.casefold() not in speakers:
                known = ", ".join(sorted(speakers.values())) or "none (this model has no named speakers)"
                raise ValueError(f"{where}: unknown speaker {speaker!r}; the model's speakers: {known}")
            speaker = speakers[speaker.casefold()]
        voice = None
        profile = entry.get("profile")
        if profile is not None:
            from .voice import load_voice
            profile = str((path.parent / profile).resolve())
            try:
                voice = load_voice(profile, model)
            except (OSError, ValueError) as e:
                raise ValueError(f"{where}: {e}") from None
        cast[name] = Cast(speaker=speaker, instruct=entry.get("instruct"), voice=voice, profile=profile)
    return cast
