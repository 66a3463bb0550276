"""Scripts: many utterances in one file, rendered to a folder of audio files (`kazeia render`, the
workbench's Script panel). Formats: .txt (one utterance per non-empty line), .csv / .tsv (a header
row) and .jsonl (one object per line), with columns `id, text` and optionally `speaker, language,
instruct, voice` (a voice profile, relative to the script's folder), `seed`, `file` (output name
without extension) and sampling overrides. Every line is checked before anything renders; the
problems come back together, each with its line number."""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

SAMPLING_COLUMNS = {"temperature": float, "top_k": int, "top_p": float, "repetition_penalty": float,
                    "cp_temperature": float, "cp_top_k": int, "cp_top_p": float, "max_frames": int}
COLUMNS = ("id", "text", "speaker", "language", "instruct", "voice", "seed", "file", *SAMPLING_COLUMNS)
FORMATS = (".txt", ".csv", ".tsv", ".jsonl")
# An output file's name without its extension, in UTF-8 bytes: file systems allow 255, less the
# extension and atomic.py's temporary prefix and suffix while it is written.
MAX_OUTPUT_NAME_BYTES = 180


@dataclass
class ScriptLine:
    number: int                  # line in the file (1-based; csv/tsv: counting the header)
    id: str
    text: str
    speaker: str | None = None
    language: str | None = None
    instruct: str | None = None
    voice: str | None = None     # a profile path as written (relative to the script's folder)
    seed: int | None = None
    file: str | None = None
    sampling: dict = field(default_factory=dict)   # overrides of SamplingParams fields


class ScriptError(ValueError):
    """Lines that cannot be rendered: [(line number, id or "", why)], all of them at once."""

    def __init__(self, path: Path, problems: list[tuple[int, str, str]]):
        self.path, self.problems = Path(path), problems
        shown = "\n".join(f"  line {n}{f' ({i})' if i else ''}: {why}" for n, i, why in problems[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(f"{path}: {len(problems)} line(s) cannot be rendered:\n{shown}{more}")


def _rows(path: Path) -> list[tuple[int, dict]]:
    """(line number, raw fields) per utterance; raises ScriptError for what cannot be read at all."""
    kind = path.suffix.lower()
    if kind not in FORMATS:
        raise ScriptError(path, [(0, "", f"unknown script format {path.suffix or '(none)'}; use {', '.join(FORMATS)}")])
    from ..text.limits import MAX_TEXT_FILE_BYTES
    from ..untrusted import InputError, loads, read_text
    try:
        text = read_text(path, MAX_TEXT_FILE_BYTES)   # (its size checked before it is read)
    except InputError as e:
        raise ScriptError(path, [(0, "", str(e).removeprefix(f"{path}: "))]) from None
    except OSError as e:
        raise ScriptError(path, [(0, "", f"cannot read it ({e.strerror})")]) from None
    if kind == ".txt":
        rows, n = [], 0
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                n += 1
                rows.append((number, {"id": f"{n:04d}", "text": line.strip()}))
        return rows
    if kind == ".jsonl":
        rows, problems = [], []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:   # (bounded: no nesting without end, no integer of thousands of digits)
                value = loads(line, "JSON", MAX_TEXT_FILE_BYTES)
            except InputError as e:   # ("JSON: not valid JSON (Expecting value: line 1 ...)" -> "not JSON: Expecting value")
                why = str(e).removeprefix("JSON: ")
                if why.startswith("not valid JSON ("):
                    why = why[len("not valid JSON ("):-1].split(":")[0]
                problems.append((number, "", f"not JSON: {why}"))
                continue
            if not isinstance(value, dict):
                problems.append((number, "", "not a JSON object"))
                continue
            rows.append((number, value))
        if problems:
            raise ScriptError(path, problems)
        return rows
    reader = csv.reader(text.splitlines(), delimiter="\t" if kind == ".tsv" else ",")
    table = list(reader)
    if not table:
        return []
    header = [h.strip() for h in table[0]]
    rows = []
    for number, cells in enumerate(table[1:], 2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) > len(header):
            rows.append((number, {"\0extra": f"{len(cells)} fields, the header has {len(header)}"}))
            continue
        rows.append((number, {h: c for h, c in zip(header, cells) if c != ""}))
    return rows


def _line(number: int, raw: dict) -> tuple[ScriptLine | None, list[str]]:
    problems = []
    if "\0extra" in raw:
        return None, [raw["\0extra"]]
    unknown = sorted(k for k in raw if k not in COLUMNS)
    if unknown:
        problems.append(f"unknown column(s) {', '.join(unknown)} (known: {', '.join(COLUMNS)})")
    text = str(raw.get("text", "")).strip()
    if not text:
        problems.append("empty text")
    ident = str(raw.get("id", "")).strip()
    if not ident:
        problems.append("no id")
    elif not re.fullmatch(r"[\w.-]+", ident):
        problems.append(f"id {ident!r} may hold letters, digits, '_', '-' and '.' only")

    def number_of(key, kind):
        if key not in raw or raw[key] in (None, ""):
            return None
        try:
            value = kind(raw[key]) if not isinstance(raw[key], bool) else None
            if value is None or (kind is int and float(raw[key]) != value):
                raise ValueError
            return value
        except (TypeError, ValueError):
            problems.append(f"{key} must be {'an integer' if kind is int else 'a number'}, got {raw[key]!r}")
            return None

    seed = number_of("seed", int)
    if seed is not None and not 0 <= seed < 2 ** 64:
        problems.append("seed must be in [0, 2**64)")
    sampling = {k: v for k, kind in SAMPLING_COLUMNS.items() if (v := number_of(k, kind)) is not None}
    opt = {k: (str(raw[k]).strip() or None) if raw.get(k) is not None else None
           for k in ("speaker", "language", "instruct", "voice", "file")}
    if opt["file"] and not re.fullmatch(r"[\w.-]+", opt["file"]):
        problems.append(f"file {opt['file']!r}: a plain name (letters, digits, '_', '-', '.'), no folders")
    line = ScriptLine(number, ident, text, opt["speaker"], opt["language"], opt["instruct"], opt["voice"], seed,
                      opt["file"], sampling)
    return line, problems


def read_script(path: str | os.PathLike) -> tuple[list[ScriptLine], list[tuple[int, str, str]]]:
    """The script's lines and the problems found without a model (format, columns, values, ids)."""
    path = Path(path)
    if not path.is_file():
        raise ScriptError(path, [(0, "", "no such file")])
    lines, problems, seen = [], [], {}
    for number, raw in _rows(path):
        line, why = _line(number, raw)
        if line is not None and line.id:
            if line.id in seen:
                why = [*why, f"duplicate id {line.id!r} (also line {seen[line.id]})"]
            else:
                seen[line.id] = number
        problems += [(number, line.id if line else "", w) for w in why]
        if line is not None:
            lines.append(line)
    if not lines and not problems:
        problems.append((0, "", "the script has no lines"))
    return lines, problems


def check_for_model(lines: list[ScriptLine], engine, folder: Path, lexicon=None) -> list[tuple[int, str, str]]:
    """Problems of each line with this model: markup, speaker, language, instruct, voice, sampling,
    length (of every prompt it is spoken as, `lexicon`'s rewrites applied: Engine.plan)."""
    from ..synthesis.requests import Request, SamplingParams
    from ..voices.voice import load_voice
    problems = []
    for line in lines:
        try:
            voice = None
            if line.voice:
                path = (folder / line.voice) if not Path(line.voice).is_absolute() else Path(line.voice)
                if not path.is_file():
                    raise ValueError(f"voice profile {line.voice} not found")
                voice = load_voice(path, engine.model)
            sampling = SamplingParams.from_model(engine.info, **line.sampling)
            engine.plan(Request(line.text, line.speaker, line.language or "auto", line.instruct, voice, sampling,
                                lexicon=lexicon))
        except (ValueError, TypeError) as e:
            problems.append((line.number, line.id, str(e)))
    return problems


def output_names(lines: list[ScriptLine], pattern: str) -> tuple[dict[str, str], list[tuple[int, str, str]]]:
    """Each line's output name (no extension) from its `file` or the pattern ({id}, {index},
    {speaker}); two lines must not share one."""
    names, problems, owner = {}, [], {}
    for index, line in enumerate(lines, 1):
        try:
            name = line.file or pattern.format(id=line.id, index=f"{index:04d}", speaker=line.speaker or "")
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"--name {pattern!r}: {e!r} (fields: {{id}}, {{index}}, {{speaker}})") from None
        name = re.sub(r"[^\w.-]+", "_", name).strip("._") or line.id
        if len(name.encode()) > MAX_OUTPUT_NAME_BYTES:   # (found now, not when its file is written)
            problems.append((line.number, line.id, f"output name of {len(name.encode())} bytes, over the limit of "
                                                   f"{MAX_OUTPUT_NAME_BYTES} (give a shorter id or file)"))
        if name in owner:
            problems.append((line.number, line.id, f"output name {name!r} is also line {owner[name]}'s"))
        owner.setdefault(name, line.number)
        names[line.id] = name
    return names, problems


def request_hash(request: dict) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
