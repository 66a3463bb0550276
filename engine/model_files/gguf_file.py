"""Writing a Kazeia model file: metadata plus tensors, each stored in the type its role allows.

Tensors are produced one at a time (read, converted, quantised, written), so a conversion
never holds more than one tensor in memory; the file appears under its name only when complete.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import gguf
import numpy as np
from tqdm import tqdm

from kazeia import _native

from ..atomic import atomic_path

# Types a user can ask for, in fallback order for a tensor whose rows do not fit the blocks.
FILE_TYPES = ("f32", "f16", "bf16", "q8_0", "q6_k", "q5_k", "q4_k")
_FALLBACK = {"q4_k": ("q4_k", "q8_0", "f16"), "q5_k": ("q5_k", "q8_0", "f16"), "q6_k": ("q6_k", "q8_0", "f16"),
             "q8_0": ("q8_0", "f16"), "bf16": ("bf16",), "f16": ("f16",), "f32": ("f32",)}
_GGML_TYPE = {"f32": gguf.GGMLQuantizationType.F32, "f16": gguf.GGMLQuantizationType.F16,
              "bf16": gguf.GGMLQuantizationType.BF16, "q8_0": gguf.GGMLQuantizationType.Q8_0,
              "q6_k": gguf.GGMLQuantizationType.Q6_K, "q5_k": gguf.GGMLQuantizationType.Q5_K,
              "q4_k": gguf.GGMLQuantizationType.Q4_K}


HALF_OR_F32 = ("f32", "f16", "bf16")
# Stages whose large matrices a type mix can set apart, by tensor-name prefix.
MIX_STAGES = {"talker": "talker.", "code_predictor": "cp."}
_STAGE_ALIASES = {"talker": "talker", "code_predictor": "code_predictor", "cp": "code_predictor"}


@dataclass(frozen=True)
class TypeMix:
    """The weight type of each stage: "q6_k" (every stage) or "talker=q5_k,code_predictor=q6_k"
    (a stage left out, and everything outside the talker and code predictor, takes the bare entry,
    else `fallback`). str() gives the canonical form recorded in the file."""
    default: str
    stages: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str, fallback: str = "f16") -> "TypeMix":
        default, stages = None, {}
        for part in (p.strip() for p in str(text).split(",")):
            stage, _, t = part.rpartition("=")
            t = t.strip().lower()
            if t not in FILE_TYPES:
                raise ValueError(f"unknown type {t!r} in {text!r}; choose one of {', '.join(FILE_TYPES)}")
            if not stage:
                if default is not None:
                    raise ValueError(f"{text!r} names two types for every stage")
                default = t
                continue
            name = _STAGE_ALIASES.get(stage.strip().lower())
            if name is None:
                raise ValueError(f"unknown stage {stage.strip()!r} in {text!r}; stages: talker, code_predictor (cp)")
            if name in stages:
                raise ValueError(f"{text!r} names the {name} twice")
            stages[name] = t
        default = default or fallback
        return cls(default, tuple((s, stages[s]) for s in MIX_STAGES if s in stages and stages[s] != default))

    def for_tensor(self, name: str) -> str:
        for stage, t in self.stages:
            if name.startswith(MIX_STAGES[stage]):
                return t
        return self.default

    def for_stage(self, stage: str) -> str:
        return dict(self.stages).get(stage, self.default)

    @property
    def slug(self) -> str:
        """For file names: "q6_k", or "talker-q5_k+cp-q6_k"."""
        short = {"talker": "talker", "code_predictor": "cp"}
        return str(self) if not self.stages else "+".join(
            f"{short[s]}-{self.for_stage(s)}" for s in MIX_STAGES)

    def __str__(self) -> str:
        if not self.stages:
            return self.default
        given = dict(self.stages)
        return ",".join(f"{s}={given.get(s, self.default)}" for s in MIX_STAGES)


def type_mix_arg(text: str) -> str:
    """argparse type for --type: checked here (a usage error, not a traceback), parsed by the command
    with its own default for stages left out."""
    import argparse
    try:
        TypeMix.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def plan_type(spec: dict, mix: TypeMix, decoder_type: str | None) -> str:
    """storage_type for one tensor of the expected-tensor table under a type mix."""
    return storage_type(spec["storage"], mix.for_tensor(spec["name"]), spec["shape"], decoder_type)


def storage_type(storage: str, requested: str, shape: list[int], decoder_type: str | None = None) -> str:
    """The type a tensor is stored in: precision-sensitive roles stay f32, decoder and encoder
    weights are never quantised (`decoder_type`, by default f16 unless the file is f32), and a
    quantised type falls back when a row length is not a multiple of its block size."""
    if requested not in _FALLBACK:
        raise ValueError(f"unknown type {requested!r}; choose one of {', '.join(FILE_TYPES)}")
    if decoder_type is not None and decoder_type not in HALF_OR_F32:
        raise ValueError(f"decoder weights are stored as f32, f16 or bf16, not {decoder_type!r}")
    if storage == "f32":
        return "f32"
    if storage == "half_or_f32":
        return decoder_type or ("f32" if requested == "f32" else "f16")
    if requested == "f32":
        return "f32"
    for t in _FALLBACK[requested]:
        if shape[-1] % _native.type_block_size(t) == 0:
            return t
    return "f32"


def estimated_file_bytes(specs: list[dict], mix: TypeMix, decoder_type: str | None) -> int:
    """Bytes of the tensor data a model file holds for this tensor table and these types (exact per
    tensor; metadata and alignment padding come on top), for disk checks before converting."""
    total = 0
    for spec in specs:
        block, size = gguf.GGML_QUANT_SIZES[_GGML_TYPE[plan_type(spec, mix, decoder_type)]]
        shape = list(spec["shape"])
        total += int(np.prod(shape[:-1], dtype=np.int64)) * (shape[-1] // block) * size
    return total


@dataclass
class TensorPlan:
    name: str
    shape: list[int]              # PyTorch order
    type: str                     # one of FILE_TYPES
    produce: Callable[[], np.ndarray]   # float32 values in `shape`


def encode_tensor(values: np.ndarray, plan: TensorPlan) -> np.ndarray:
    """float32 values -> uint8 array [*shape[:-1], bytes per row] in the plan's ggml type."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    if list(values.shape) != list(plan.shape):
        raise ValueError(f"tensor {plan.name}: produced shape {list(values.shape)}, planned {plan.shape}")
    rows = values.reshape(-1, plan.shape[-1])
    data = _native.quantize(rows, plan.type)
    return data.reshape(*plan.shape[:-1], data.shape[-1])


def _row_bytes(plan: TensorPlan) -> int:
    block = _native.type_block_size(plan.type)
    probe = _native.quantize(np.zeros((1, plan.shape[-1]), np.float32), plan.type)
    assert plan.shape[-1] % block == 0
    return probe.shape[1]


def _add_metadata(writer: gguf.GGUFWriter, key: str, value: Any) -> None:
    if key == "general.architecture" or (isinstance(value, (list, tuple)) and not value):
        return  # the writer adds the architecture itself; GGUF writers refuse empty arrays (absent = empty)
    V = gguf.GGUFValueType
    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_int32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    elif isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value):
            writer.add_key_value(key, list(value), V.ARRAY, sub_type=V.STRING)
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            writer.add_key_value(key, [int(v) for v in value], V.ARRAY, sub_type=V.INT32)
        else:
            raise TypeError(f"metadata {key}: mixed array")
    else:
        raise TypeError(f"metadata {key}: unsupported value type {type(value).__name__}")


def write_model_file(path: str | os.PathLike, metadata: dict[str, Any], plans: list[TensorPlan],
                     progress: bool = True, label: str = "writing",
                     on_progress: Callable[[int, int], None] | None = None) -> None:
    """progress: a terminal progress bar; on_progress(done, total) in parameters, for GUIs."""
    with atomic_path(path) as partial:   # unique per process: concurrent writers never collide
        _write_model_file(partial, metadata, plans, progress, label, on_progress)


def _write_model_file(partial: Path, metadata: dict[str, Any], plans: list[TensorPlan], progress: bool, label: str,
                      on_progress: Callable[[int, int], None] | None) -> None:
    writer = gguf.GGUFWriter(partial, metadata["general.architecture"])
    for key, value in metadata.items():
        _add_metadata(writer, key, value)
    row_bytes = {}
    for plan in plans:
        key = (plan.type, plan.shape[-1])
        if key not in row_bytes:
            row_bytes[key] = _row_bytes(plan)
        byte_shape = [*plan.shape[:-1], row_bytes[key]]
        writer.add_tensor_info(plan.name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                               raw_dtype=_GGML_TYPE[plan.type])
    total = sum(int(np.prod(plan.shape)) for plan in plans)
    show = progress and sys.stderr.isatty()
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        done = 0
        with tqdm(total=total, unit="param", unit_scale=True, desc=label, disable=not show) as bar:
            for plan in plans:
                writer.write_tensor_data(encode_tensor(plan.produce(), plan))
                n = int(np.prod(plan.shape))
                done += n
                bar.update(n)
                if on_progress:
                    on_progress(done, total)
    finally:
        writer.close()
