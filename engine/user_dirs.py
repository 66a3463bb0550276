"""Where a user's own files live: takes, voice profiles and converted models under the data folder
(KAZEIA_DATA_DIR, else $XDG_DATA_HOME/kazeia, else ~/.local/share/kazeia)."""
from __future__ import annotations

import os
from pathlib import Path


def data_dir() -> Path:
    env = os.environ.get("KAZEIA_DATA_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return Path(base) / "kazeia"


def models_dir() -> Path:
    return data_dir() / "models"
