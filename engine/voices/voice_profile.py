"""A voice profile file (.kzvoice) read as outside input: profiles are shared as files, so one is
checked whole before anything uses it. The file's size is known before it is read; the zip's members
are counted, and their declared sizes checked against limits and against the file, before any is
inflated; each array's .npy header (dtype, shape) is checked before its data is touched, so a header
claiming terabytes allocates nothing; the meta is bounded JSON (engine/untrusted.py) with every field
of the right type and range. A bad file gives one InputError (a ValueError) naming the file and the
field; nothing else escapes.

The file is what `numpy.savez` writes: NAME.npy members, `meta` the UTF-8 JSON as uint8."""
from __future__ import annotations

import io
import json
import math
import os
import re
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..atomic import atomic_path
from ..untrusted import InputError, bounded, loads, object_field, read_bytes, shown, text_field

FORMAT, PROFILE_VERSION = "kazeia-voice", 1
# A profile is ~50 KB and an exported one adds a preview (a short sentence): the limits leave room
# far above that and far below what hurts.
MAX_FILE_BYTES = 16 * 2**20
MAX_MEMBERS = 64                 # central-directory entries (each costs memory before any check)
MAX_META_BYTES = 2**20
MAX_HIDDEN = 16384               # x-vector values (the talker's hidden size: 1024 and 2048 today)
MAX_REF_FRAMES = 1500            # reference codes: 60 s of reference at 12.5 frames/s is 750
CODEBOOKS, CODEBOOK_SIZE = 16, 2048
MAX_PREVIEW_SAMPLES = 30 * 48000
SAMPLE_RATES = (8000, 192000)
MAX_TEXT = 10_000                # a transcript, notes (characters)
MAX_SHORT = 200                  # a model name, a source, a language, a tag, a name
MAX_TAGS = 100
SIZE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,15}")   # 0b6, 1b7, tiny
TIME_RANGE = (0.0, 1e11)         # seconds since 1970 (to the year 5138)
_NPY_HEADER = 1024               # room for a .npy header in a member's size

# array -> (dtype kinds allowed, the largest itemsize, the dtype it is read as)
ARRAYS = {"meta": ("u", 1, np.uint8), "x_vector": ("f", 8, np.float32), "ref_codes": ("iu", 8, np.int32),
          "preview": ("f", 4, np.float32)}
_MAX_ITEMS = {"meta": MAX_META_BYTES, "x_vector": MAX_HIDDEN, "ref_codes": MAX_REF_FRAMES * CODEBOOKS,
              "preview": MAX_PREVIEW_SAMPLES}


def read_profile(path: str | os.PathLike) -> tuple[dict, dict]:
    """A profile file's meta and arrays (x_vector float32; ref_codes int32 [frames, 16] and preview
    float32 when there), checked whole but not against any model. InputError names what is wrong."""
    data = read_bytes(path, MAX_FILE_BYTES, f"{path}")
    return profile_from_bytes(data, str(path))


def profile_from_bytes(data: bytes, what: str) -> tuple[dict, dict]:
    members = _members(data, what)
    if "meta" not in members or "x_vector" not in members:
        raise InputError(f"{what}: not a Kazeia voice profile (it has no {'meta' if 'meta' not in members else 'x_vector'})")
    arrays = {name: _array(raw, name, what) for name, raw in members.items()}
    meta = loads(arrays.pop("meta").tobytes(), f"{what}: meta", MAX_META_BYTES)
    check_meta(meta, arrays, what)
    return meta, arrays


def _members(data: bytes, what: str) -> dict[str, bytes]:
    """The known members' bytes, each size checked before it is inflated; unknown members are left
    unread (a later version's), but counted."""
    if not data.startswith(b"PK"):
        raise InputError(f"{what}: not a Kazeia voice profile (not a zip file)")
    if data.count(b"PK\x01\x02") > MAX_MEMBERS:   # (an upper bound on the central directory's entries)
        raise InputError(f"{what}: not a Kazeia voice profile (over {MAX_MEMBERS} members)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            names = [i.filename for i in infos]
            if len(set(names)) != len(names):
                raise InputError(f"{what}: not a Kazeia voice profile (a member is there twice)")
            wanted = [i for i in infos if i.filename.endswith(".npy") and i.filename[:-4] in ARRAYS]
            total = 0
            for info in wanted:
                name = info.filename[:-4]
                _, itemsize, _ = ARRAYS[name]
                limit = _MAX_ITEMS[name] * itemsize + _NPY_HEADER
                if info.flag_bits & 0x1:
                    raise InputError(f"{what}: {name}: encrypted")
                if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    raise InputError(f"{what}: {name}: compressed in a way a profile never is ({info.compress_type})")
                if info.file_size > limit:
                    raise InputError(f"{what}: {name}: {info.file_size:,} bytes, over the limit of {limit:,}")
                # against the file itself: stored members are as large as they say, deflate's
                # ratio is at most 1032:1
                if info.compress_size > len(data) or info.file_size > 1032 * info.compress_size + 64 or (
                        info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size):
                    raise InputError(f"{what}: {name}: its declared sizes do not fit the file")
                total += info.file_size
            if total > 2 * MAX_FILE_BYTES:
                raise InputError(f"{what}: the arrays declare {total:,} bytes, over the limit of {2 * MAX_FILE_BYTES:,}")
            out = {}
            for info in wanted:
                with zf.open(info) as f:   # (reads at most file_size bytes, then checks the CRC)
                    out[info.filename[:-4]] = f.read(info.file_size + 1)
            return out
    except InputError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, NotImplementedError, RuntimeError, EOFError,
            OSError, zlib.error, KeyError, IndexError, OverflowError) as e:
        raise InputError(f"{what}: not a Kazeia voice profile ({_short(e)})") from None


def _short(e: Exception) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _array(raw: bytes, name: str, what: str) -> np.ndarray:
    """A .npy member as an array: its header's dtype and shape checked against what `name` may be and
    against the bytes there are, before any array is made (a made array is a view of `raw`'s copy)."""
    kinds, itemsize, as_dtype = ARRAYS[name]
    f = io.BytesIO(raw)
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"npy format {version[0]}.{version[1]}")
    except (ValueError, TypeError, EOFError, SyntaxError, RecursionError, MemoryError, OverflowError, KeyError) as e:
        raise InputError(f"{what}: {name}: not a readable array ({_short(e)})") from None
    if dtype.kind not in kinds or dtype.itemsize > itemsize or dtype.hasobject or dtype.fields is not None \
            or dtype.subdtype is not None:
        raise InputError(f"{what}: {name}: an array of {dtype} (it holds {'/'.join(kinds)} numbers)")
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise InputError(f"{what}: {name}: shape {shape}")
    count = math.prod(shape)
    if count > _MAX_ITEMS[name]:
        raise InputError(f"{what}: {name}: shape {list(shape)} ({count:,} values), over the limit of {_MAX_ITEMS[name]:,}")
    body = raw[f.tell():]
    if len(body) != count * dtype.itemsize:
        raise InputError(f"{what}: {name}: shape {list(shape)} needs {count * dtype.itemsize:,} bytes, the file holds {len(body):,}")
    array = np.frombuffer(body, dtype=dtype, count=count).reshape(shape, order="F" if fortran else "C")
    if dtype.kind == "f" and not np.isfinite(array).all():
        raise InputError(f"{what}: {name}: holds a value that is not a finite number")
    if dtype.kind in "iu":
        if count and (array.min() < 0 or array.max() >= (256 if name == "meta" else CODEBOOK_SIZE)):
            raise InputError(f"{what}: {name}: values outside [0, {CODEBOOK_SIZE})")
    return np.ascontiguousarray(array, dtype=as_dtype).copy()


def check_meta(meta, arrays: dict, what: str) -> None:
    """Every field a reader uses, of its type and in its range; the arrays' shapes against it."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise InputError(f"{what}: not a Kazeia voice profile (meta.format is not {FORMAT!r})")
    version = meta.get("version")
    if version != PROFILE_VERSION or isinstance(version, bool):
        raise InputError(f"{what}: voice profile version {shown(version)}, this build reads {PROFILE_VERSION}")
    model = object_field(f"{what}: meta.model", meta.get("model"))
    for key in ("name", "variant"):
        text_field(f"{what}: meta.model.{key}", model.get(key), MAX_SHORT)
    size = model.get("size")
    if not isinstance(size, str) or not SIZE_PATTERN.fullmatch(size):
        raise InputError(f"{what}: meta.model.size: {shown(size)} is not a model size (such as 0b6 or 1b7)")
    hidden = bounded(f"{what}: meta.model.hidden_size", model.get("hidden_size"), 1, MAX_HIDDEN, integer=True)
    ref_text = meta.get("ref_text")
    if ref_text is not None:
        text_field(f"{what}: meta.ref_text", ref_text, MAX_TEXT)
    about = meta.get("about")
    if about is not None:
        check_about(object_field(f"{what}: meta.about", about), f"{what}: meta.about")

    x = arrays["x_vector"]
    if x.ndim != 1 or len(x) != hidden:
        raise InputError(f"{what}: x_vector: shape {list(x.shape)}, meta.model.hidden_size says [{hidden}]")
    codes = arrays.get("ref_codes")
    if codes is not None:
        if codes.ndim != 2 or codes.shape[1] != CODEBOOKS or not 1 <= len(codes) <= MAX_REF_FRAMES:
            raise InputError(f"{what}: ref_codes: shape {list(codes.shape)}, not [1 to {MAX_REF_FRAMES} frames, {CODEBOOKS}]")
        if not (ref_text or "").strip():
            raise InputError(f"{what}: meta.ref_text: reference codes need their transcript")
    preview, info = arrays.get("preview"), meta.get("preview")
    if (preview is None) != (info is None):
        raise InputError(f"{what}: " + ("meta.preview: there is no preview audio" if preview is None
                                        else "preview: audio without meta.preview (its sample rate)"))
    if info is not None:
        info = object_field(f"{what}: meta.preview", info)
        bounded(f"{what}: meta.preview.sample_rate", info.get("sample_rate"), *SAMPLE_RATES, integer=True)
        text_field(f"{what}: meta.preview.text", info.get("text", ""), MAX_TEXT)
        if preview.ndim != 1 or len(preview) == 0:
            raise InputError(f"{what}: preview: shape {list(preview.shape)}, not [samples]")


def check_about(about: dict, what: str) -> dict:
    """What the library knows of a voice (each field optional; None is as missing)."""
    for key, limit in (("source", MAX_SHORT), ("language", MAX_SHORT), ("name", MAX_SHORT), ("notes", MAX_TEXT)):
        if about.get(key) is not None:
            text_field(f"{what}.{key}", about[key], limit)
    tags = about.get("tags")
    if tags is not None:
        if not isinstance(tags, list) or len(tags) > MAX_TAGS:
            raise InputError(f"{what}.tags: a list of at most {MAX_TAGS} tags is needed")
        for i, tag in enumerate(tags):
            text_field(f"{what}.tags[{i}]", tag, MAX_SHORT)
    for key in ("created", "imported"):
        if about.get(key) is not None:
            bounded(f"{what}.{key}", about[key], *TIME_RANGE)
    origin = about.get("origin")
    if origin is not None:
        for key, value in object_field(f"{what}.origin", origin).items():
            if len(key) > MAX_SHORT:
                raise InputError(f"{what}.origin: a key of {len(key):,} characters")
            if isinstance(value, (dict, list)):
                raise InputError(f"{what}.origin.{shown(key)}: a {type(value).__name__}, not a plain value")
            if isinstance(value, float) and not math.isfinite(value):
                raise InputError(f"{what}.origin.{shown(key)}: not a finite number")
    return about


def write_profile(path: str | os.PathLike, meta: dict, arrays: dict) -> Path:
    """A profile file from its meta and arrays, atomically (the library rewrites profiles this way);
    checked as read_profile checks it first, so no file is written that would be refused."""
    path = Path(path)
    check_meta(meta, arrays, str(path))
    arrays = {**arrays, "meta": np.frombuffer(json.dumps(meta, ensure_ascii=False).encode(), np.uint8)}
    with atomic_path(path) as tmp, open(tmp, "wb") as f:   # (a file object: savez adds no suffix)
        np.savez(f, **arrays)
    return path
