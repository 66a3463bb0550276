"""An independent, minimal safetensors reader for tests (bf16 widened to f32 by bit shift), so
that converter checks do not rely on the converter's own reader."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

_NP = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64}


def read_all(path: Path) -> dict[str, np.ndarray]:
    blob = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        arr = np.frombuffer(blob[8 + n + a:8 + n + b], dtype=_NP[meta["dtype"]]).reshape(meta["shape"])
        if meta["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr.astype(np.float32)
    return out


def checkpoint_tensors(folder: Path) -> dict[str, np.ndarray]:
    tensors = read_all(Path(folder) / "model.safetensors")
    tensors.update(read_all(Path(folder) / "speech_tokenizer" / "model.safetensors"))
    return tensors
