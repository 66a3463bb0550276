"""Reading a released Qwen3-TTS checkpoint folder exactly as published, without torch.

safetensors files are parsed directly (8-byte header length, JSON header, raw data) so that
bf16 tensors can be widened to f32 bit-exactly with numpy alone.
"""
from __future__ import annotations

import json
import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .errors import ConversionError

_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "F64": np.float64,
           "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


@dataclass
class _TensorRef:
    file: Path
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


class SafetensorsFolder:
    """Tensors of one or more safetensors files, by name, loaded lazily as float32."""

    def __init__(self, files: list[Path] = ()):
        self._refs: dict[str, _TensorRef] = {}
        self._maps: dict[Path, tuple[object, mmap.mmap]] = {}
        for path in files:
            self.add_file(path)

    def add_file(self, path: Path) -> None:
        size = path.stat().st_size
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise ConversionError(f"{path}: not a safetensors file (too short)")
            (n,) = struct.unpack("<Q", raw)
            if n > min(size - 8, 100 << 20):
                raise ConversionError(f"{path}: not a safetensors file (header length {n})")
            try:
                header = json.loads(f.read(n))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ConversionError(f"{path}: corrupt safetensors header ({e})") from None
        data_start = 8 + n
        for name, meta in header.items():
            if name == "__metadata__":
                continue
            begin, end = (int(x) for x in meta["data_offsets"])
            if meta["dtype"] not in _DTYPES:
                raise ConversionError(f"{path}: tensor {name} has unsupported dtype {meta['dtype']}")
            if data_start + end > size:
                raise ConversionError(f"{path}: truncated, tensor {name} extends past the end of the file")
            if name in self._refs:
                raise ConversionError(f"tensor {name} appears in both {self._refs[name].file} and {path}")
            self._refs[name] = _TensorRef(path, meta["dtype"], tuple(meta["shape"]), data_start + begin, data_start + end)

    def names(self) -> list[str]:
        return sorted(self._refs)

    def shape(self, name: str) -> tuple[int, ...]:
        return self._refs[name].shape

    def raw(self, name: str) -> tuple[str, np.ndarray]:
        """(safetensors dtype, array in the stored dtype; bf16 as uint16 bit patterns)."""
        ref = self._refs[name]
        if ref.file not in self._maps:
            f = open(ref.file, "rb")
            self._maps[ref.file] = (f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        _, mm = self._maps[ref.file]
        arr = np.frombuffer(mm, dtype=_DTYPES[ref.dtype], count=(ref.end - ref.begin) // np.dtype(_DTYPES[ref.dtype]).itemsize,
                            offset=ref.begin)
        return ref.dtype, arr.reshape(ref.shape)

    def float32(self, name: str) -> np.ndarray:
        dtype, arr = self.raw(name)
        if dtype == "BF16":
            return (arr.astype(np.uint32) << 16).view(np.float32)
        return arr.astype(np.float32)

    def close(self) -> None:
        for f, mm in self._maps.values():
            mm.close()
            f.close()
        self._maps.clear()


@dataclass
class Checkpoint:
    """A Qwen3-TTS checkpoint folder: configs, text tokenizer files and tensors."""
    path: Path
    config: dict
    generation_config: dict
    speech_tokenizer_config: dict
    tokenizer_files: dict[str, Path]
    tensors: SafetensorsFolder = field(repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "Checkpoint":
        root = Path(path)
        if not root.is_dir():
            raise ConversionError(f"{root}: not a folder (expected a Hugging Face checkpoint folder)")
        config = _read_json(root / "config.json")
        if config.get("model_type") != "qwen3_tts":
            raise ConversionError(f"{root}/config.json: model_type is {config.get('model_type')!r}, expected 'qwen3_tts'")
        gen = _read_json(root / "generation_config.json") if (root / "generation_config.json").exists() else {}
        st_dir = root / "speech_tokenizer"
        st_config = _read_json(st_dir / "config.json")
        tok = {}
        for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
            if not (root / name).exists():
                raise ConversionError(f"{root}: missing text tokenizer file {name}")
            tok[name] = root / name
        # talker names start with talker./speaker_encoder., speech tokenizer names with encoder./decoder.
        folder = SafetensorsFolder(_weight_files(root, "model") + _weight_files(st_dir, "model"))
        return cls(root, config, gen, st_config, tok, folder)


def _read_json(path: Path) -> dict:
    if not path.exists():
        raise ConversionError(f"missing {path}")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise ConversionError(f"{path}: invalid JSON ({e})") from None


def _weight_files(folder: Path, stem: str) -> list[Path]:
    single = folder / f"{stem}.safetensors"
    index = folder / f"{stem}.safetensors.index.json"
    if single.exists():
        return [single]
    if index.exists():
        shards = sorted(set(_read_json(index).get("weight_map", {}).values()))
        missing = [s for s in shards if not (folder / s).exists()]
        if missing:
            raise ConversionError(f"{folder}: shards listed in {index.name} are missing: {', '.join(missing)}")
        return [folder / s for s in shards]
    raise ConversionError(f"{folder}: no {stem}.safetensors or {stem}.safetensors.index.json")
