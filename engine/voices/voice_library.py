"""The voice library: the user's voice profiles (.kzvoice, engine/voices/voice.py) in one folder, shared by the
workbench, `kazeia say --voice NAME`, `kazeia voice` and `kazeia serve` (its /v1/audio/voices).

Each profile carries what the library knows of it (`about` in its meta: source, language, notes, tags,
when it was made, where it came from), so the profiles are the truth: `index.json` beside them is only
a cache of what they say (one read per changed file), rebuilt from the profiles when it is missing,
stale or damaged, and written atomically. Two workbenches may share the folder: every write is a whole
file renamed into place, a rename never replaces another profile, and each reader sees the files as
they are. Previews (a short sentence in the voice) are cached in `.previews/` by everything that
decides their audio; an exported profile carries its preview, and an import brings it back."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ..atomic import atomic_path, atomic_write_text
from ..synthesis.prompt import Voice
from ..untrusted import InputError, bounded, loads, name_bytes, read_bytes, remove_tree_inside
from ..user_dirs import data_dir
from .voice import voice_digest
from .voice_profile import SAMPLE_RATES, read_profile, write_profile

INDEX = "index.json"
INDEX_VERSION = 2              # 2: entries of profiles checked whole (engine/voices/voice_profile.py); a 1 is read again
SOURCES = ("recording", "designed", "custom voice", "take", "imported")
PREVIEW_TEXT = "This is how I sound."
SUFFIX = ".kzvoice"
MAX_NAME_BYTES = 200             # a profile's name in UTF-8: with " 99" and ".kzvoice", a file name fits
MAX_INDEX_BYTES = 64 * 2**20


def clean_tags(tags) -> list[str]:
    """Tags as kept: stripped, once each, sorted."""
    return sorted({str(t).strip() for t in tags or () if str(t).strip()}, key=str.casefold)


def clean_name(name) -> str:
    """A profile name that is also a file name (letters, digits, spaces, - and _; no separator, no
    dot: never `..` nor a hidden file), at most MAX_NAME_BYTES of UTF-8."""
    return name_bytes(re.sub(r"[^\w\- ]+", "_", str(name)).strip(), MAX_NAME_BYTES).strip()


@dataclass
class VoiceEntry:
    """One profile as the library lists it."""
    name: str
    kind: str = "x-vector"         # x-vector | in-context | unreadable
    model: str = ""                # the Base model it was made with
    size: str = ""                 # its size (0.6B, 1.7B): a profile speaks on Base models of that size
    source: str = "recording"      # SOURCES
    language: str = ""
    notes: str = ""
    tags: list[str] = field(default_factory=list)
    transcript: str = ""
    created: float = 0.0
    origin: dict = field(default_factory=dict)   # a kept take's text, model, voice, seed
    problem: str = ""              # why an unreadable file cannot be used

    def matches(self, query: str) -> bool:
        """Every word of `query` is in the name, tags, notes, language, source, size, model or transcript."""
        hay = " ".join([self.name, " ".join(self.tags), self.notes, self.language, self.source, self.size,
                        self.model, self.transcript]).casefold()
        return all(word in hay for word in query.casefold().split())


def _entry(name: str, meta: dict, arrays: dict) -> VoiceEntry:
    """(meta checked whole by read_profile: every field here has its type)"""
    about, made_for = meta.get("about") or {}, meta["model"]
    return VoiceEntry(name, "in-context" if "ref_codes" in arrays else "x-vector", made_for["name"],
                      made_for["size"], about.get("source") or "recording", about.get("language") or "",
                      about.get("notes") or "", list(about.get("tags") or []), meta.get("ref_text") or "",
                      float(about.get("created") or 0.0), dict(about.get("origin") or {}))


def _problem(path: Path, error: ValueError) -> str:
    """Why a file is unreadable, without its path (the library lists it by name)."""
    text = str(error)
    return text[len(str(path)) + 2:] if text.startswith(f"{path}: ") else text


_ENTRY_TYPES = {"name": str, "kind": str, "model": str, "size": str, "source": str, "language": str, "notes": str,
                "tags": list, "transcript": str, "created": (int, float), "origin": dict, "problem": str}


def _cached_entry(name: str, item) -> VoiceEntry | None:
    """An entry of the index (a cache, and a file anyone may have changed) when every field has its
    type; None: read the profile again."""
    entry = item.get("entry") if isinstance(item, dict) else None
    if not isinstance(entry, dict) or set(entry) != set(_ENTRY_TYPES):
        return None
    for key, kind in _ENTRY_TYPES.items():
        if not isinstance(entry[key], kind) or isinstance(entry[key], bool):
            return None
    if not all(isinstance(t, str) for t in entry["tags"]) or not math.isfinite(entry["created"]):
        return None
    return VoiceEntry(**{**entry, "name": name})


class VoiceLibrary:
    def __init__(self, folder: str | os.PathLike | None = None):
        """`folder`: the voices folder itself (default: the user's data folder's voices/)."""
        self.folder = Path(folder) if folder is not None else data_dir() / "voices"
        self.folder.mkdir(parents=True, exist_ok=True)

    # ---- reading -------------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.folder / f"{name}{SUFFIX}"

    def names(self) -> list[str]:
        """The profiles' names (a hidden file, such as a profile being written, is none)."""
        return sorted((p.stem for p in self.folder.glob(f"*{SUFFIX}") if not p.name.startswith(".")),
                      key=str.casefold)

    def entries(self) -> list[VoiceEntry]:
        """Every profile, by name; the index answers for files it has seen unchanged."""
        index = self._read_index()
        fresh, changed = {}, False
        for name in self.names():
            path = self.path(name)
            try:
                st = path.stat()
            except OSError:   # (removed by another window meanwhile)
                continue
            stamp = [st.st_mtime_ns, st.st_size]
            cached = index.get(path.name)
            if isinstance(cached, dict) and cached.get("stamp") == stamp and _cached_entry(name, cached):
                fresh[path.name] = cached
                continue
            try:
                meta, arrays = read_profile(path)
                entry = asdict(_entry(name, meta, arrays))
            except ValueError as e:   # (read_profile raises nothing else: a bad file is listed as such)
                entry = asdict(VoiceEntry(name, kind="unreadable", problem=_problem(path, e)))
            fresh[path.name] = {"stamp": stamp, "entry": entry}
            changed = True
        if changed or set(fresh) != set(index):
            self._write_index(fresh)
        return [_cached_entry(Path(key).stem, item) for key, item in fresh.items()]

    def entry(self, name: str) -> VoiceEntry:
        found = next((e for e in self.entries() if e.name == name), None)
        if found is None:
            raise ValueError(self._unknown(name))
        return found

    def search(self, query: str = "") -> list[VoiceEntry]:
        return [e for e in self.entries() if e.matches(query)]

    def find(self, name: str) -> Path:
        """A profile of the library by its name (any case; a file elsewhere is voice_file's); ValueError
        names the voices there are."""
        for candidate in self.names():
            if candidate.casefold() == name.strip().casefold():
                return self.path(candidate)
        raise ValueError(self._unknown(name))

    def _unknown(self, name: str) -> str:
        names = self.names()
        return (f"no voice {name!r} in the voice library ({self.folder}); it has: {', '.join(names)}" if names
                else f"no voice {name!r}: the voice library ({self.folder}) is empty (kazeia voice create ...)")

    # ---- the index (a cache) -------------------------------------------------------------------
    def _read_index(self) -> dict:
        try:
            data = loads(read_bytes(self.folder / INDEX, MAX_INDEX_BYTES), INDEX, MAX_INDEX_BYTES)
            if isinstance(data, dict) and data.get("version") == INDEX_VERSION and isinstance(data.get("files"), dict):
                return {k: v for k, v in data["files"].items() if isinstance(v, dict)}
        except (OSError, ValueError):
            pass   # (missing, damaged or too large: rebuilt from the profiles)
        return {}

    def _write_index(self, files: dict) -> None:
        try:
            atomic_write_text(self.folder / INDEX, json.dumps({"version": INDEX_VERSION, "files": files},
                                                              ensure_ascii=False, indent=0))
        except OSError:
            pass   # (a read-only or full disk: the library still reads the profiles)

    # ---- writing -------------------------------------------------------------------------------
    def free_name(self, name: str) -> str:
        """`name` cleaned for a file name, numbered when taken (by any case)."""
        name = clean_name(name) or "voice"
        taken = {n.casefold() for n in self.names()}
        base, n = name, 2
        while name.casefold() in taken:
            name, n = f"{base} {n}", n + 1
        return name

    def add(self, voice, model, name: str, about: dict | None = None) -> str:
        """Saves `voice` (made with `model`) under a free form of `name`; returns the name used."""
        from .voice import save_voice
        name = self.free_name(name)
        about = {"source": "recording", "created": time.time(), **(about or {})}
        about["tags"] = clean_tags(about.get("tags"))
        save_voice(voice, self.path(name), model, about)
        return name

    def update(self, name: str, **changes) -> VoiceEntry:
        """Changes a profile's language, notes, tags or source (the profile file is rewritten whole)."""
        allowed = {"language", "notes", "tags", "source"}
        unknown = set(changes) - allowed
        if unknown:
            raise ValueError(f"a voice's {', '.join(sorted(unknown))} cannot be changed here")
        if "tags" in changes:
            changes["tags"] = clean_tags(changes["tags"])
        path = self.find(name)
        meta, arrays = read_profile(path)
        meta["about"] = {**(meta.get("about") or {}), **changes}
        write_profile(path, meta, arrays)
        return self.entry(path.stem)

    def rename(self, name: str, new: str) -> str:
        new = clean_name(new)
        if not new:
            raise ValueError("a voice needs a name (letters, digits, spaces, - or _)")
        old = self._own(self.find(name))
        if new.casefold() != old.stem.casefold() and new.casefold() in {n.casefold() for n in self.names()}:
            raise ValueError(f"cannot rename {old.stem!r} to {new!r}: that name is taken")
        target = self._own(self.path(new))
        if new.casefold() == old.stem.casefold():
            old.rename(target)   # (only the case changes)
        else:
            os.link(old, target)   # (fails if another window took the name meanwhile: never replaces it)
            old.unlink()
        return new

    def delete(self, name: str) -> None:
        """The profile and its cached previews (unless another profile holds the same voice): both
        only inside the library's folder."""
        path = self._own(self.find(name))

        def digest(n: str) -> str | None:
            try:
                return self._voice_digest(n)
            except ValueError:   # (an unreadable profile has no previews)
                return None
        mine = digest(path.stem)
        shared = any(digest(n) == mine for n in self.names() if n != path.stem)
        path.unlink(missing_ok=True)
        if mine and not shared:
            previews = self.folder / ".previews"
            remove_tree_inside(previews, previews / mine)

    def _own(self, path: Path) -> Path:
        """`path` when it names a file right in the library's folder (the name checked, the file not
        followed: deleting or renaming a link touches the link)."""
        if path.parent != self.folder or path.name in ("", ".", "..") or os.sep in path.name:
            raise InputError(f"{path}: not a file of the voice library {self.folder}; refused")
        return path

    # ---- previews ------------------------------------------------------------------------------
    def _voice_digest(self, name: str) -> str:
        """The voice itself (engine/voices/voice.py's voice_digest, and the model size it was made for): notes,
        tags and renames leave it alone. Hex computed here: a folder name nothing in the file names."""
        meta, arrays = read_profile(self.find(name))
        voice = Voice(arrays["x_vector"], arrays.get("ref_codes"), meta.get("ref_text"))
        key = json.dumps([voice_digest(voice), meta["model"]["size"]])
        return hashlib.sha256(key.encode()).hexdigest()[:24]

    def _preview_path(self, name: str, model_info=None, language: str = "auto") -> Path:
        """Keyed by everything that decides the preview's audio: the voice, the model file and the
        language; without a model, the preview a profile brought with it (an import)."""
        folder = self.folder / ".previews" / self._voice_digest(name)
        if model_info is None:
            return folder / "carried.wav"
        key = json.dumps([model_info.path.name, model_info.file_size, language, PREVIEW_TEXT])
        return folder / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.wav"

    def cached_preview(self, name: str, model_info=None, language: str = "auto") -> tuple[np.ndarray, int] | None:
        """(audio, rate) of the preview made on this model, else of the one the profile came with."""
        import soundfile
        for path in (self._preview_path(name, model_info, language), self._preview_path(name)):
            try:
                audio, rate = soundfile.read(str(path), dtype="float32")
                return audio, rate
            except (OSError, RuntimeError, soundfile.LibsndfileError):
                continue
        return None

    def keep_preview(self, name: str, audio: np.ndarray, sample_rate: int, model_info=None,
                     language: str = "auto") -> Path:
        import soundfile
        path = self._preview_path(name, model_info, language)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            soundfile.write(str(tmp), np.asarray(audio, np.float32), sample_rate, format="WAV", subtype="FLOAT")
        return path

    # ---- one file out, one file in ---------------------------------------------------------------
    def export(self, name: str, dest: str | os.PathLike, model_info=None, language: str = "auto") -> Path:
        """The profile with its notes and tags, and its cached preview (made on `model_info`, else the
        one it came with) when there is one, as one .kzvoice file."""
        path = self.find(name)
        meta, arrays = read_profile(path)
        meta["about"] = {**(meta.get("about") or {}), "name": path.stem}
        preview = self.cached_preview(name, model_info, language)
        if preview is not None:
            arrays["preview"] = np.asarray(preview[0], np.float32)
            meta["preview"] = {"sample_rate": int(preview[1]), "text": PREVIEW_TEXT}
        dest = Path(dest)
        if dest.is_dir():
            dest = dest / f"{path.stem}{SUFFIX}"
        return write_profile(dest, meta, arrays)

    def import_file(self, path: str | os.PathLike, name: str | None = None) -> str:
        """A .kzvoice file (exported, or from `kazeia voice create`) into the library under a free name;
        its preview, if it carries one, is kept apart (the profile in the library holds none)."""
        meta, arrays = read_profile(path)   # (checked whole: a bad file is refused before anything is written)
        about = meta.get("about") or {}
        # (the first of these that leaves a name once cleaned: "  " or "..." leave none)
        name = self.free_name(next((n for n in (name, about.get("name"), Path(path).stem) if n and clean_name(n)),
                                   "voice"))
        preview = arrays.pop("preview", None)
        info = meta.pop("preview", None)
        meta["about"] = {**{k: v for k, v in about.items() if k != "name"},
                         "source": about.get("source") or "imported", "imported": time.time()}
        write_profile(self._own(self.path(name)), meta, arrays)
        if preview is not None and info:
            rate = bounded(f"{path}: meta.preview.sample_rate", info["sample_rate"], *SAMPLE_RATES, integer=True)
            self.keep_preview(name, preview, rate)
        return name


def voice_file(name_or_path: str, library: VoiceLibrary | None = None) -> Path:
    """What `--voice` names: a profile file's path, else a voice of the library (any case)."""
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    if path.suffix == SUFFIX and (path.parent != Path(".") or os.sep in name_or_path):
        raise ValueError(f"--voice {name_or_path}: no such file")
    return (library or VoiceLibrary()).find(name_or_path)


def load_named_voice(name_or_path: str, model):
    """`--voice`'s profile (a file, or a voice of the library) loaded for `model`."""
    from .voice import load_voice
    return load_voice(voice_file(name_or_path), model)
