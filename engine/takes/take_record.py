"""A workbench take's record as read from disk (takes/index.json, a take file's .json beside it):
outside input like any file, so checked whole before anything uses it. Its id names its audio file
(ID.wav), so an id is only ever a plain file name's stem (what TakeStore.new_id makes, or the stem of
an audio file found in the takes folder): never a separator, never a leading dot. Every field the
workbench and `kazeia voice create --from-take` read has its type and range; a bad one is an
InputError naming the file, the take and the field."""
from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from ..synthesis.requests import SamplingParams
from ..untrusted import InputError, bounded, loads, object_field, read_bytes, shown, text_field

TAKE_ID = re.compile(r"\w[\w.+ -]{0,199}")   # 20261206-101500-a1b2c3, or a recovered file's stem
MAX_INDEX_BYTES = 256 * 2**20   # every take's timings and frame times (~30 KB a take)
MAX_RECORD_BYTES = 16 * 2**20   # one take's .json beside its audio
MAX_SEED = 2**64 - 1            # a seed (a chunk's is derived from the take's: any 64-bit value)
MAX_SPIN_SEED = 2**31 - 1       # a take's own seed: the workbench's seed box holds it again
MAX_TEXT = 10_000_000


def take_id(value, what: str) -> str:
    """`value` when it is a take id (a file name's stem of ours); InputError otherwise."""
    if not isinstance(value, str) or not TAKE_ID.fullmatch(value) or value != value.strip():
        raise InputError(f"{what}: {shown(value, 60)} is not a take id (letters, digits, - _ . + and spaces)")
    return value


def read_index(path: str | Path) -> list:
    """takes/index.json: a list of records (each still to check); InputError when it is not one."""
    data = loads(read_bytes(path, MAX_INDEX_BYTES), str(path), MAX_INDEX_BYTES, nan=True)
    if not isinstance(data, list):
        raise InputError(f"{path}: a list of takes is needed, not {type(data).__name__}")
    return data


def read_record(path: str | Path) -> dict:
    """A take's record kept beside its audio file (FILE.wav.json)."""
    return check_record(loads(read_bytes(path, MAX_RECORD_BYTES), str(path), MAX_RECORD_BYTES, nan=True), str(path),
                        partial=True)


REQUIRED = ("id", "created", "text", "model", "request", "sampling", "placement", "threads", "timings",
            "stop_reason", "sample_rate")


def check_record(d, what: str, partial: bool = False) -> dict:
    """`d` when every field a reader uses has its type and range (fields of a later version are left
    alone); `partial`: the fields a file's own record may leave out (it is not a listed take)."""
    if not isinstance(d, dict):
        raise InputError(f"{what}: a take is an object, not {type(d).__name__}")
    missing = [k for k in REQUIRED if k not in d]
    if missing and not partial:
        raise InputError(f"{what}: take {shown(d.get('id', '?'), 60)} has no {', '.join(missing)}")
    if "id" in d:
        what = f"{what}: take {shown(d['id'], 60)}"
        take_id(d["id"], f"{what}: id")
    for key in ("text", "model", "stop_reason", "name"):
        if key in d:
            text_field(f"{what}: {key}", d[key], MAX_TEXT)
    if "created" in d:
        bounded(f"{what}: created", d["created"], 0, 1e11)
    if "threads" in d:
        bounded(f"{what}: threads", d["threads"], 0, 65536, integer=True)
    if "sample_rate" in d:
        bounded(f"{what}: sample_rate", d["sample_rate"], 1, 768000, integer=True)
    if "peak_memory_mb" in d:
        _number(d["peak_memory_mb"], f"{what}: peak_memory_mb")
    if "request" in d:
        _request(object_field(f"{what}: request", d["request"]), f"{what}: request")
    if "sampling" in d:
        _sampling(object_field(f"{what}: sampling", d["sampling"]), f"{what}: sampling")
    for key, check in (("placement", _text), ("where", _text), ("timings", _number),
                       ("frame_ms", _numbers)):
        if key in d:
            for k, v in object_field(f"{what}: {key}", d[key]).items():
                check(v, f"{what}: {key}.{shown(k)}")
    timings = d.get("timings") or {}
    if "frames" in timings:
        bounded(f"{what}: timings.frames", timings["frames"], 0, 2**31, integer=True)
    if "frame_seconds" in timings:
        bounded(f"{what}: timings.frame_seconds", timings["frame_seconds"], 0, 10)
    if "comparison" in d:
        _comparison(object_field(f"{what}: comparison", d["comparison"]), f"{what}: comparison")
    if "chunks" in d:
        if not isinstance(d["chunks"], list):
            raise InputError(f"{what}: chunks: a list is needed, not {type(d['chunks']).__name__}")
        for i, chunk in enumerate(d["chunks"]):
            _chunk(object_field(f"{what}: chunks[{i}]", chunk), f"{what}: chunks[{i}]")
    return d


def _text(value, what: str) -> None:
    text_field(what, value, MAX_TEXT)


def _optional_text(value, what: str) -> None:
    if value is not None:
        text_field(what, value, MAX_TEXT)


def _number(value, what: str) -> None:
    """A number (NaN and infinities too: a rate or an SNR may be one, and every reader formats them)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{what}: a number is needed, not {type(value).__name__}")
    if isinstance(value, int) and abs(value) > 2**63:
        raise InputError(f"{what}: {value} is out of range")


def _numbers(value, what: str) -> None:
    if not isinstance(value, list):
        raise InputError(f"{what}: a list of numbers is needed, not {type(value).__name__}")
    for i, v in enumerate(value):
        _number(v, f"{what}[{i}]")


def _seed(value, what: str) -> None:
    bounded(what, value, 0, MAX_SEED, integer=True)


def _request(r: dict, what: str) -> None:
    for key in ("speaker", "language", "instruct", "voice_profile"):
        _optional_text(r.get(key), f"{what}.{key}")
    if r.get("streaming_text") is not None and not isinstance(r["streaming_text"], bool):
        raise InputError(f"{what}.streaming_text: true or false is needed")
    for k, v in object_field(f"{what}.chunk_seeds", r.get("chunk_seeds", {})).items():
        if not re.fullmatch(r"[0-9]{1,9}", k):
            raise InputError(f"{what}.chunk_seeds: {shown(k)} is not a chunk's number")
        _seed(v, f"{what}.chunk_seeds.{k}")


def _sampling(s: dict, what: str) -> None:
    known = {f.name for f in fields(SamplingParams)}
    try:
        SamplingParams(**{k: v for k, v in s.items() if k in known}).validate()
    except ValueError as e:
        raise InputError(f"{what}: {e}") from None
    if "seed" in s:
        bounded(f"{what}.seed", s["seed"], 0, MAX_SPIN_SEED, integer=True)


def _comparison(c: dict, what: str) -> None:
    for key in ("group", "side", "other"):
        _optional_text(c.get(key), f"{what}.{key}")
    d = c.get("difference")
    if d is None:
        return
    d = object_field(f"{what}.difference", d)
    if not isinstance(d.get("codes_identical"), bool):
        raise InputError(f"{what}.difference.codes_identical: true or false is needed")
    if d.get("first_divergent_frame") is not None:
        bounded(f"{what}.difference.first_divergent_frame", d["first_divergent_frame"], 0, 2**31, integer=True)
    frames = d.get("frames")
    if not isinstance(frames, list) or len(frames) != 2:
        raise InputError(f"{what}.difference.frames: two frame counts are needed")
    for i, n in enumerate(frames):
        bounded(f"{what}.difference.frames[{i}]", n, 0, 2**31, integer=True)
    for key in ("snr_db", "max_abs_diff"):
        _number(d.get(key), f"{what}.difference.{key}")


CHUNK_FIELDS = ("index", "written", "voice", "seed", "span", "stop_reason")   # (what every reader of a chunk reads)


def _chunk(c: dict, what: str) -> None:
    missing = [k for k in CHUNK_FIELDS if k not in c]
    if missing:
        raise InputError(f"{what}: has no {', '.join(missing)}")
    bounded(f"{what}.index", c.get("index"), 0, 2**31, integer=True)
    for key in ("text", "written", "stop_reason"):
        text_field(f"{what}.{key}", c.get(key, ""), MAX_TEXT)
    for key in ("voice", "language"):
        _optional_text(c.get(key), f"{what}.{key}")
    if c.get("seed") is not None:
        _seed(c["seed"], f"{what}.seed")
    span = c.get("span")
    if not isinstance(span, list) or len(span) != 2:
        raise InputError(f"{what}.span: [start, end] in samples is needed")
    start = bounded(f"{what}.span[0]", span[0], 0, 2**40, integer=True)
    bounded(f"{what}.span[1]", span[1], start, 2**40, integer=True)
    rewrites = c.get("rewrites", [])
    if not isinstance(rewrites, list):
        raise InputError(f"{what}.rewrites: a list is needed")
    for i, r in enumerate(rewrites):
        if not isinstance(r, list) or len(r) != 3 or not all(isinstance(x, str) for x in r[:2]):
            raise InputError(f"{what}.rewrites[{i}]: [term, replacement, source] is needed")
