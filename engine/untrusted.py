"""Reading what comes from outside (files a user was given, sockets, web pages) as hostile until it is
checked whole: JSON that cannot nest without bound nor carry numbers no reader keeps, files read only
up to a size decided before reading, numbers checked finite and in range, and paths that are never
named by what was read: deletes and renames stay inside the folder that owns them, work folders are
made fresh (a symlink found there is refused, never followed).

Each reader of a kind of input (voice profiles, takes, blind tests, books, text files, requests) uses
these and raises `InputError`, one line that names the file or field and what is wrong with it; the
command line answers it with exit code 2, the server with 400, the workbench with a message."""
from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

MAX_JSON_DEPTH = 64          # arrays and objects inside each other (Kazeia's own files nest < 8)
MAX_INT_DIGITS = 30          # no field of Kazeia's holds an integer over 2**64 (20 digits)
MAX_NAME_BYTES = 255         # a file name on ext4, XFS, Btrfs, APFS, NTFS (UTF-16 units there)


class InputError(ValueError):
    """Outside input that cannot be used, and why (the file or field is named in the message)."""


# ---- JSON ----------------------------------------------------------------------------------------
def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text`, found by one scan (no recursion): strings
    are skipped, so brackets inside them do not count."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits)} digits")
    return int(digits)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):   # (1e999 reads as infinity)
        raise ValueError(f"{text[:20]} is not a finite number")
    return value


def loads(data: str | bytes | bytearray, what: str, max_bytes: int, max_depth: int = MAX_JSON_DEPTH,
          nan: bool = False) -> Any:
    """JSON from outside: at most `max_bytes` (UTF-8), `max_depth` levels, integers of at most
    MAX_INT_DIGITS digits, no NaN or Infinity (unless `nan`: Kazeia's own files that Python's json
    wrote with them, such as a take's SNR of identical audio). InputError names `what` and the fault."""
    if len(data) > max_bytes:
        raise InputError(f"{what}: {len(data)} bytes, over the limit of {max_bytes}")
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{what}: not UTF-8 text (byte {e.start})") from None
    if json_depth(data) > max_depth:
        raise InputError(f"{what}: nested deeper than {max_depth} levels")
    try:
        return json.loads(data, parse_constant=None if nan else _no_constant, parse_int=_bounded_int,
                          parse_float=float if nan else _finite_float)
    except (ValueError, RecursionError) as e:   # (JSONDecodeError is a ValueError)
        raise InputError(f"{what}: not valid JSON ({e})") from None


def shown(value, max_chars: int = 40) -> str:
    """A key or name read from outside as a message shows it: as it is when plain (letters, digits,
    _ - .), else quoted and escaped (never a line break, never a terminal's control code); cut."""
    text = value if isinstance(value, str) else repr(value)
    if text and len(text) <= max_chars and all(c.isalnum() or c in "_-." for c in text) and text.isascii():
        return text
    return repr(text[:max_chars]) + ("..." if len(text) > max_chars else "")


# ---- files ---------------------------------------------------------------------------------------
def read_bytes(path: str | os.PathLike, max_bytes: int, what: str | None = None) -> bytes:
    """A regular file's bytes, refused before reading when over `max_bytes` (a device such as
    /dev/zero, a FIFO or a folder is refused: its size is not known before reading)."""
    what = what or str(path)
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise InputError(f"{what}: not a regular file")
            if st.st_size > max_bytes:
                raise InputError(f"{what}: {st.st_size:,} bytes, over the limit of {max_bytes:,}")
            data = f.read(st.st_size + 1)   # (a buffer of the file's size, not of the limit)
            if len(data) > st.st_size:   # (it grew meanwhile: read on, to the limit)
                data += f.read(max_bytes + 1 - len(data))
    except IsADirectoryError:
        raise InputError(f"{what}: a folder, not a file") from None
    except FileNotFoundError:
        raise InputError(f"{what}: no such file") from None
    except PermissionError:
        raise InputError(f"{what}: not readable (permission denied)") from None
    if len(data) > max_bytes:   # (it grew while read)
        raise InputError(f"{what}: over the limit of {max_bytes:,} bytes")
    return data


def read_text(path: str | os.PathLike, max_bytes: int, what: str | None = None) -> str:
    """A UTF-8 text file (a BOM is dropped), its size checked before reading; InputError names the
    byte where the encoding breaks."""
    what = what or str(path)
    data = read_bytes(path, max_bytes, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"{what}: not UTF-8 text (byte {e.start:,}); save it as UTF-8") from None


# ---- numbers -------------------------------------------------------------------------------------
def bounded(what: str, value, low: float, high: float, integer: bool = False):
    """`value` as a finite number in [low, high] (an int when `integer`); InputError otherwise. A
    bool is not a number here (JSON's true is not 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what}: a number is needed, not {type(value).__name__}")
    if integer and not isinstance(value, int):
        if not (isinstance(value, float) and value.is_integer()):
            raise InputError(f"{what}: a whole number is needed, not {value!r}")
        value = int(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{what}: {value} is not a finite number")
    if not low <= value <= high:
        raise InputError(f"{what}: {value} is out of range [{low:g}, {high:g}]")
    return value


def object_field(what: str, value) -> dict:
    """`value` as a JSON object (a dict); InputError naming `what` otherwise."""
    if not isinstance(value, dict):
        raise InputError(f"{what}: an object is needed, not {type(value).__name__}")
    return value


def text_field(what: str, value, max_chars: int, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InputError(f"{what}: text is needed, not {type(value).__name__}")
    if len(value) > max_chars:
        raise InputError(f"{what}: {len(value):,} characters, over the limit of {max_chars:,}")
    if not allow_empty and not value.strip():
        raise InputError(f"{what}: empty")
    return value


# ---- paths ---------------------------------------------------------------------------------------
def inside(folder: str | os.PathLike, path: str | os.PathLike) -> Path:
    """`path` resolved (links followed) when it lies inside `folder` (resolved too); InputError
    otherwise. Every delete and rename goes through this."""
    root, target = Path(folder).resolve(), Path(path).resolve()
    if target == root or root not in target.parents:
        raise InputError(f"{path}: outside {folder}; refused")
    return target


def remove_tree_inside(folder: str | os.PathLike, path: str | os.PathLike) -> bool:
    """Removes the folder `path` and what it holds when it lies inside `folder` and is not a link;
    False when there was nothing to remove. InputError when it lies outside."""
    import shutil
    p = Path(path)
    if p.is_symlink():
        inside(folder, p.parent)
        p.unlink()
        return True
    if not p.exists():
        return False
    inside(folder, p)
    shutil.rmtree(p)
    return True


def fresh_folder(path: str | os.PathLike, what: str = "work folder") -> Path:
    """A folder of ours at `path`: made when missing; an existing real folder is kept (resume), but a
    symlink (or anything that is not a folder) in its place is refused, never followed."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(p, 0o700)
    except FileExistsError:
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            raise InputError(f"{p}: the {what} is a symbolic link; refused (remove it, or choose another folder)") from None
        if not stat.S_ISDIR(st.st_mode):
            raise InputError(f"{p}: the {what} exists and is not a folder") from None
    return p


def name_bytes(name: str, max_bytes: int) -> str:
    """`name` cut to at most `max_bytes` of UTF-8 at a character boundary (file names are capped in
    bytes, not characters: 72 CJK letters are 216 bytes)."""
    data = name.encode("utf-8")
    if len(data) <= max_bytes:
        return name
    return data[:max_bytes].decode("utf-8", errors="ignore")
