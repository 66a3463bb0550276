"""The models a user has pulled, by name: registry.json in the models folder (user_dirs.models_dir()),
rewritten whole and atomically under a lock, so a reader never sees half an update and two pulls
at once both land. Only complete, verified files are ever recorded (models/pull.py)."""
from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterator

from ..atomic import atomic_write_text
from ..user_dirs import models_dir

REGISTRY_FILE = "registry.json"
_NAME = re.compile(r"^[a-z0-9][a-z0-9._+-]{0,79}$")
RESERVED_NAMES = ("demo",)   # resolve_model's bundled demo model


@dataclass
class ModelEntry:
    name: str
    path: str               # the GGUF file
    source: str             # repository id
    revision: str           # the commit it was converted from
    type: str               # talker / code-predictor type or mix, as recorded in the file
    decoder_type: str
    variant: str            # custom_voice / voice_design / base
    size: str               # "0.6B", "1.7B", or a parameter count for other sizes
    file_bytes: int
    added: str              # ISO 8601, UTC
    endpoint: str = ""      # the hub it came from

    @classmethod
    def from_dict(cls, d: dict) -> "ModelEntry":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def check_name(name: str) -> str:
    if not _NAME.match(name) or name in RESERVED_NAMES:
        raise ValueError(f"{name!r} cannot name a model: use lower-case letters, digits, '.', '_', '+' and '-' "
                         f"(up to 80), not {', '.join(RESERVED_NAMES)}")
    return name


class Registry:
    def __init__(self, folder: str | os.PathLike | None = None):
        self.folder = Path(folder) if folder is not None else models_dir()
        self.path = self.folder / REGISTRY_FILE

    def entries(self) -> list[ModelEntry]:
        return sorted(self._read().values(), key=lambda e: e.name)

    def get(self, name: str) -> ModelEntry | None:
        return self._read().get(name)

    def add(self, entry: ModelEntry) -> None:
        """Records (or replaces) an entry whose file is already complete."""
        check_name(entry.name)
        with self._locked():
            models = self._read()
            models[entry.name] = entry
            self._write(models)

    def remove(self, name: str) -> ModelEntry:
        with self._locked():
            models = self._read()
            if name not in models:
                raise ValueError(f"no model named {name!r} (kazeia models lists them)")
            entry = models.pop(name)
            self._write(models)
        return entry

    def _read(self) -> dict[str, ModelEntry]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return {d["name"]: ModelEntry.from_dict(d) for d in data["models"]}
        except FileNotFoundError:
            return {}
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"the model registry {self.path} is damaged ({e}): repair or delete it") from None

    def _write(self, models: dict[str, ModelEntry]) -> None:
        data = {"version": 1, "models": [asdict(models[n]) for n in sorted(models)]}
        atomic_write_text(self.path, json.dumps(data, indent=2) + "\n")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Read-modify-write under an exclusive lock (a lock file beside the registry; none on
        platforms without fcntl, where the atomic rename still keeps the file whole)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            import fcntl
        except ImportError:
            yield
            return
        with open(self.folder / (REGISTRY_FILE + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def registered_path(name: str) -> Path | None:
    """The file of a registered model, None when no model has that name; an error when it is
    registered but its file has gone."""
    entry = Registry().get(name)
    if entry is None:
        return None
    path = Path(entry.path)
    if not path.is_file():
        raise ValueError(f"model {name!r} is registered but its file {path} is missing: "
                         f"`kazeia pull {entry.source}` fetches it again, `kazeia models rm {name}` forgets it")
    return path
