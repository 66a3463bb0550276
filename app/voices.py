"""The voice library: voice profiles (.kzvoice) of Base models, kept in the user's data folder."""
from __future__ import annotations

import re
from pathlib import Path

from kazeia.engine import ModelFile, create_voice, load_voice, save_voice

from .takes import data_dir

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif"}


class VoiceLibrary:
    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder or data_dir()) / "voices"
        self.folder.mkdir(parents=True, exist_ok=True)

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.kzvoice"))

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.kzvoice"

    def create(self, name: str, model: ModelFile, audio: str | Path, text: str | None = None) -> str:
        name = re.sub(r"[^\w\- ]+", "_", name).strip() or "voice"
        base, n = name, 2
        while self.path(name).exists():
            name, n = f"{base} {n}", n + 1
        save_voice(create_voice(model, audio, text=text), self.path(name), model)
        return name

    def load(self, name: str, model: ModelFile):
        return load_voice(self.path(name), model)

    def rename(self, name: str, new: str) -> str:
        new = re.sub(r"[^\w\- ]+", "_", new).strip()
        if not new or self.path(new).exists():
            raise ValueError(f"cannot rename to {new!r}: empty or taken")
        self.path(name).rename(self.path(new))
        return new

    def delete(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)
