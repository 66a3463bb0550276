"""The voice library: voice profiles (.kzvoice) of Base models, kept in the user's data folder.
File operations only; creating a profile (native work) runs on the engine's worker."""
from __future__ import annotations

import re
from pathlib import Path

from kazeia.engine import voice_profile_info
from kazeia.engine.user_dirs import data_dir

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".mp3", ".aiff", ".aif"}


def clean_name(name: str) -> str:
    return re.sub(r"[^\w\- ]+", "_", name).strip()


class VoiceLibrary:
    def __init__(self, folder: Path | None = None):
        self.folder = Path(folder or data_dir()) / "voices"
        self.folder.mkdir(parents=True, exist_ok=True)

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.kzvoice"))

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.kzvoice"

    def free_name(self, name: str) -> str:
        """`name` cleaned for a file name, numbered when taken."""
        name = clean_name(name) or "voice"
        base, n = name, 2
        while self.path(name).exists():
            name, n = f"{base} {n}", n + 1
        return name

    def info(self, name: str) -> dict:
        try:
            return voice_profile_info(self.path(name))
        except ValueError as e:
            return {"kind": "unreadable", "model": str(e), "size": "", "transcript": ""}

    def rename(self, name: str, new: str) -> str:
        new = clean_name(new)
        if not new or self.path(new).exists():
            raise ValueError(f"cannot rename to {new!r}: empty or taken")
        self.path(name).rename(self.path(new))
        return new

    def delete(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)
