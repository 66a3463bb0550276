"""How far a regenerated set of goldens is from the committed one, quantity by quantity.

A quantity is a float array of an npz file ("decoder_long.npz:wav_chunked") or a float in a JSON
file ("manifest.json:decoder_long.max_abs_diff_chunked_vs_full"). Everything else (integer arrays:
ids, codes, sampled tokens; strings; JSON ints and keys; checkpoint tensors and text files) must be
identical on every CPU, and is listed as a mismatch when it is not.

Used by test_reference_live.py (against the stored tolerances) and measure_spread.py (to measure
the reference's own spread and store those tolerances). Standard library and numpy only.
"""
from __future__ import annotations

import fnmatch
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# JSON paths that differ whenever any float differs, or that record a run's settings: the npz
# files' hashes and sizes (their arrays are compared one by one) and the torch thread count
IGNORED_JSON = ("manifest.json:files.*.npz.sha256", "manifest.json:files.*.npz.bytes", "manifest.json:total_bytes",
                "manifest.json:settings.torch_threads")


@dataclass
class GoldenDiff:
    float_diffs: dict[str, float] = field(default_factory=dict)   # quantity -> max |regenerated - committed|
    magnitudes: dict[str, float] = field(default_factory=dict)    # quantity -> max |committed|
    mismatches: list[str] = field(default_factory=list)           # what must be identical and is not


def committed_files(root: Path, pattern: str = "**/*") -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.glob(pattern) if p.is_file())


def _ignored(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, rule) for rule in IGNORED_JSON)


def _read_safetensors(path: Path) -> tuple[dict, dict[str, tuple[str, list, bytes]]]:
    """Minimal safetensors reader (8-byte header length, JSON header, raw data)."""
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    return meta, {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def _json_walk(path: str, a: Any, b: Any, out: GoldenDiff) -> None:
    if _ignored(path):
        return
    if isinstance(a, dict):
        if not isinstance(b, dict) or list(a) != list(b):
            out.mismatches.append(f"{path}: keys differ")
            return
        for k in a:
            _json_walk(f"{path}.{k}" if not path.endswith(":") else f"{path}{k}", a[k], b[k], out)
    elif isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            out.mismatches.append(f"{path}: list length differs")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            _json_walk(f"{path}[{i}]", x, y, out)
    elif isinstance(a, float) and isinstance(b, float):
        out.float_diffs[path] = abs(a - b)
        out.magnitudes[path] = abs(a)
    elif type(a) is not type(b) or a != b:
        out.mismatches.append(f"{path}: {a!r} != {b!r}")


def compare(committed: Path, regenerated: Path) -> GoldenDiff:
    out = GoldenDiff()
    old_files, new_files = set(committed_files(committed)), set(committed_files(regenerated))
    if old_files != new_files:
        out.mismatches.append(f"files differ: only committed {sorted(old_files - new_files)}, "
                              f"only regenerated {sorted(new_files - old_files)}")
    for name in sorted(old_files & new_files):
        a, b = committed / name, regenerated / name
        if name.endswith(".npz"):
            with np.load(a) as old, np.load(b) as new:
                if old.files != new.files:
                    out.mismatches.append(f"{name}: arrays differ: {sorted(set(old.files) ^ set(new.files))}")
                    continue
                for key in old.files:
                    x, y, q = old[key], new[key], f"{name}:{key}"
                    if x.dtype != y.dtype or x.shape != y.shape:
                        out.mismatches.append(f"{q}: {x.dtype}{x.shape} != {y.dtype}{y.shape}")
                    elif np.issubdtype(x.dtype, np.floating):
                        if np.array_equal(np.isnan(x), np.isnan(y)):
                            ok = ~np.isnan(x) & (x != y)   # equal infinities (masked logits) are no diff
                            out.float_diffs[q] = float(np.max(np.abs(x[ok] - y[ok]), initial=0.0))
                        else:
                            out.mismatches.append(f"{q}: NaNs in other places")
                            continue
                        out.magnitudes[q] = float(np.max(np.abs(x[np.isfinite(x)]), initial=0.0))
                    elif not np.array_equal(x, y):
                        out.mismatches.append(f"{q}: {int(np.sum(x != y))} of {x.size} values differ")
        elif name.endswith(".json") and "/" not in name:
            _json_walk(f"{name}:", json.loads(a.read_text(encoding="utf-8")),
                       json.loads(b.read_text(encoding="utf-8")), out)
        elif name.endswith(".safetensors"):
            old_meta, old = _read_safetensors(a)
            new_meta, new = _read_safetensors(b)
            bad = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            if old_meta != new_meta or bad:
                out.mismatches.append(f"{name}: {len(bad)} tensors differ, e.g. {bad[:5]}")
        elif a.read_bytes() != b.read_bytes():
            out.mismatches.append(f"{name}: contents differ")
    return out
