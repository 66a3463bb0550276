"""The voices a request may name: the model's speakers (CustomVoice), voice profiles (Base models: the
voice library, engine/voices/voice_library.py, or the .kzvoice files of a `--voices` folder; those made for
another model size are left out and said so) and OpenAI's voice names, which clients send by default (most
send "alloy"), mapped to one of those; on a VoiceDesign model a name maps to an instruction.
The mapping is the server's to change (`--voice-map alloy=NAME`); a name that is none of these is
refused, never replaced by a default."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..synthesis.prompt import Voice
from ..voices.voice import load_voice

if TYPE_CHECKING:
    from ..model_files.model_file import ModelFile

# OpenAI's voices, in its own order; VoiceDesign speaks each as its one-line description
OPENAI_VOICES = {
    "alloy": "A neutral, balanced adult voice, clear and even.",
    "ash": "A warm, confident adult male voice.",
    "ballad": "A soft, expressive voice with a gentle, melodic delivery.",
    "coral": "A bright, friendly adult female voice.",
    "echo": "A calm, resonant adult male voice.",
    "fable": "A lively storyteller's voice, expressive and warm.",
    "nova": "An energetic, youthful female voice.",
    "onyx": "A deep, authoritative male voice.",
    "sage": "A measured, thoughtful voice, calm and precise.",
    "shimmer": "A soft, airy female voice.",
    "verse": "A versatile, expressive voice with a natural rhythm.",
    "marin": "A clear, natural female voice, relaxed and conversational.",
    "cedar": "A natural, grounded male voice, relaxed and conversational.",
}


@dataclass
class NamedVoice:
    """What a voice name stands for: one of speaker, profile (a Voice) or instruction."""
    name: str
    kind: str                      # speaker | profile | instruction
    speaker: str | None = None
    voice: Voice | None = None
    instruct: str | None = None
    maps_to: str | None = None     # an OpenAI name: the speaker or profile it stands for
    about: dict | None = None      # a profile's library entry: language, tags, notes, source


class UnknownVoice(KeyError):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class VoiceBook:
    def __init__(self, model: "ModelFile", profiles: str | Path | None = None, mapping: dict[str, str] | None = None):
        """`profiles`: a folder of profiles (None: the voice library, for a Base model)."""
        from ..voices.voice_library import VoiceLibrary
        info = model.info
        self.variant = info.variant
        self._voices: dict[str, NamedVoice] = {}
        self.skipped: list[str] = []   # profiles that cannot speak on this model, and why
        for s in info.speakers:
            self._voices[s.name.casefold()] = NamedVoice(s.name, "speaker", speaker=s.name)
        if profiles is not None:
            folder = Path(profiles)
            if not folder.is_dir():
                raise ValueError(f"--voices {folder}: no such folder")
            if self.variant != "base":
                raise ValueError(f"--voices: voice profiles need a Base model; {info.path.name} is {self.variant}")
        if self.variant == "base":
            library = VoiceLibrary(profiles) if profiles is not None else VoiceLibrary()
            for entry in library.entries():
                try:
                    voice = load_voice(library.path(entry.name), model)
                except ValueError as e:
                    self.skipped.append(str(e))
                    continue
                self._voices[entry.name.casefold()] = NamedVoice(
                    entry.name, "profile", voice=voice,
                    about={k: v for k, v in (("language", entry.language), ("tags", entry.tags), ("notes", entry.notes),
                                             ("source", entry.source)) if v})
        own = list(self._voices.values())
        for i, (alias, description) in enumerate(OPENAI_VOICES.items()):
            if alias in self._voices:
                continue
            if self.variant == "voice_design":
                self._voices[alias] = NamedVoice(alias, "instruction", instruct=description)
            elif own:   # each in turn: a client's default voice speaks at once
                target = own[i % len(own)]
                self._voices[alias] = NamedVoice(alias, target.kind, target.speaker, target.voice, maps_to=target.name)
        for alias, target in (mapping or {}).items():
            self._voices[alias.casefold()] = self._mapped(alias, target)

    def _mapped(self, alias: str, target: str) -> NamedVoice:
        if self.variant == "voice_design":   # a name for an instruction
            if not target.strip():
                raise ValueError(f"--voice-map {alias}=: give the instruction the name stands for")
            return NamedVoice(alias, "instruction", instruct=target.strip())
        found = self._voices.get(target.casefold())
        if found is None or found.maps_to is not None:
            raise ValueError(f"--voice-map {alias}={target}: no speaker or voice profile {target!r}; "
                             f"this server has: {', '.join(self.own_names()) or 'none'}")
        return NamedVoice(alias, found.kind, found.speaker, found.voice, maps_to=found.name)

    def own_names(self) -> list[str]:
        return [v.name for v in self._voices.values() if v.kind != "instruction" and v.maps_to is None]

    def resolve(self, name: str) -> NamedVoice:
        found = self._voices.get(name.strip().casefold())
        if found is None:
            names = ", ".join(v.name for v in self._voices.values()) or "none"
            hint = " (a Base model speaks voice profiles: start the server with --voices DIR)" \
                if self.variant == "base" and not self.own_names() else ""
            raise UnknownVoice(f"unknown voice {name!r}; this server has: {names}{hint}")
        return found

    def listing(self) -> list[dict]:
        out = []
        for v in self._voices.values():
            entry = {"id": v.name, "kind": v.kind}
            if v.maps_to:
                entry["maps_to"] = v.maps_to
            if v.instruct:
                entry["instructions"] = v.instruct
            if v.about:
                entry.update(v.about)
            out.append(entry)
        return out
