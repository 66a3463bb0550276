"""`kazeia convert`: a released Qwen3-TTS checkpoint folder -> one self-contained GGUF file."""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kazeia import _native

from ..atomic import atomic_path
from .checkpoint import Checkpoint, SafetensorsFolder
from .errors import ConversionError
from .gguf_file import TensorPlan, TypeMix, plan_type, write_model_file
from .metadata import P, metadata_from_configs
from .text_tokenizer import tokenizer_json_from_files

CODEBOOK_EPS = 1e-5   # the reference clamps cluster usage to this before dividing


@dataclass
class ConversionReport:
    path: Path
    n_tensors: int
    n_params: int
    types: dict[str, int] = field(default_factory=dict)
    consumed: int = 0
    ignored: int = 0
    seconds: float = 0.0


def expected_tensors(metadata: dict) -> list[dict]:
    """The tensor table for these hyper-parameters (shared with the native loader)."""
    try:
        return _native.expected_tensors(metadata)
    except _native.ModelLoadError as e:
        raise ConversionError(f"config values are not usable: {e}") from None


def _producer(tensors: SafetensorsFolder, spec: dict):
    sources = spec["sources"]
    if spec["transform"] == "codebook":
        def codebook() -> np.ndarray:
            total = tensors.float32(sources[0])
            usage = tensors.float32(sources[1])
            return total / np.maximum(usage, np.float32(CODEBOOK_EPS))[:, None]
        return codebook
    return lambda: tensors.float32(sources[0])


def _check_sources(tensors: SafetensorsFolder, specs: list[dict], metadata: dict) -> tuple[list[str], list[str]]:
    """(consumed, ignored) source names; raises naming every missing, misshaped or unknown tensor."""
    available = set(tensors.names())
    problems, consumed = [], []
    for spec in specs:
        for i, src in enumerate(spec["sources"]):
            if src not in available:
                problems.append(f"missing tensor {src} (for {spec['name']})")
                continue
            consumed.append(src)
            want = spec["shape"] if i == 0 else spec["shape"][:1]
            got = list(tensors.shape(src))
            if got != want:
                problems.append(f"tensor {src} has shape {got}, expected {want}")
    ignored_patterns = [re.compile(p) for p, _ in _native.ignored_sources(metadata)]
    leftover = sorted(available - set(consumed))
    ignored = [n for n in leftover if any(p.search(n) for p in ignored_patterns)]
    for name in leftover:
        if name not in ignored:
            problems.append(f"unexpected tensor {name} (not part of this model variant)")
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise ConversionError(f"checkpoint does not match its config:\n  {shown}{more}")
    return sorted(consumed), ignored


def convert(hf_dir: str | os.PathLike, out_path: str | os.PathLike, out_type: str | TypeMix = "f16",
            progress: bool = True, decoder_type: str | None = None,
            on_progress=None, model_name: str | None = None) -> ConversionReport:
    """`out_type`: one type, or a per-stage mix ("talker=q5_k,code_predictor=q6_k"). `model_name`
    (general.name) defaults to the folder's name (a hub cache folder is named by its commit)."""
    start = time.perf_counter()
    mix = out_type if isinstance(out_type, TypeMix) else TypeMix.parse(out_type)
    ckpt = Checkpoint.open(hf_dir)
    try:
        md = metadata_from_configs(ckpt.config, ckpt.generation_config, ckpt.speech_tokenizer_config)
        specs = expected_tensors(md)
        consumed, ignored = _check_sources(ckpt.tensors, specs, md)
        md["general.name"] = model_name or Path(hf_dir).resolve().name
        md["general.description"] = f"Qwen3-TTS {md[P + 'variant']} ({md[P + 'size']}), converted by Kazeia"
        md[P + "random_weights"] = False
        md[P + "file_type"] = str(mix)
        md[P + "tokenizer.split"] = "qwen2"
        md["tokenizer.huggingface.json"] = tokenizer_json_from_files(
            ckpt.tokenizer_files["vocab.json"], ckpt.tokenizer_files["merges.txt"],
            ckpt.tokenizer_files["tokenizer_config.json"])
        md[P + "source.tensors"] = consumed
        md[P + "source.ignored"] = ignored
        plans = [TensorPlan(s["name"], list(s["shape"]), plan_type(s, mix, decoder_type), _producer(ckpt.tensors, s))
                 for s in specs]
        write_model_file(out_path, md, plans, progress=progress, label=f"convert {Path(hf_dir).name}",
                         on_progress=on_progress)
    finally:
        ckpt.tensors.close()
    types: dict[str, int] = {}
    for plan in plans:
        types[plan.type] = types.get(plan.type, 0) + 1
    return ConversionReport(Path(out_path), len(plans), sum(int(np.prod(p.shape)) for p in plans), types,
                            len(consumed), len(ignored), time.perf_counter() - start)


def converted_checkpoint(hf_dir: str | os.PathLike, out_type: str = "q8_0", on_start=None, on_progress=None) -> Path:
    """A Hugging Face checkpoint folder as a GGUF file, converted once and kept in the user's models
    folder (`<folder name>-<type>.gguf`; written atomically, so an interrupted conversion leaves
    nothing that would be taken for done). on_start(message) is called when a conversion starts."""
    from ..user_dirs import models_dir
    folder = Path(hf_dir)
    out = models_dir() / f"{folder.name}-{out_type}.gguf"
    if not out.exists():
        if on_start is not None:
            on_start(f"converting {folder.name} to {out_type} (once; cached in {out.parent}) ...")
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(out) as tmp:
            convert(folder, tmp, out_type=out_type, progress=False, on_progress=on_progress)
    return out
