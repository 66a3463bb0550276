"""The files the bench runs: cached full-size random models of any type or per-stage mix, a shared
Hugging Face checkpoint that Kazeia and peer engines both read, and what a model file is."""
from __future__ import annotations

import sys
from pathlib import Path

from ..model_files.convert import convert
from ..model_files.demo import cache_dir
from ..model_files.gguf_file import TypeMix
from ..model_files.random_checkpoint import make_random_checkpoint
from ..model_files.random_model import make_random_model
from .text import SHARED_SEED


def bench_model(size: str, decoder_type: str, progress: bool, out_type: str = "q8_0") -> Path:
    """A cached random model of `size`; the same seed gives the same values in every type."""
    mix = TypeMix.parse(out_type, fallback="q8_0")
    path = cache_dir() / f"bench-{size}-custom_voice-{mix.slug}-dec{decoder_type}-seed0.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        if progress:
            print(f"making the {size} {out_type} random model once: {path} (0.6B: 0.8-4 GB, 1.7B: 2-8 GB; "
                  "minutes)", file=sys.stderr)
        make_random_model(path, size=size, variant="custom_voice", seed=0, out_type=mix,
                          decoder_type=decoder_type, progress=progress)
        if progress:
            print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB)", file=sys.stderr)
    return path


def model_path_for(model: str | None, size: str, decoder_type: str, progress: bool, out_type: str) -> Path:
    """--model (a file, or "demo"), else the cached random model of --size."""
    if model:
        from ..model_files.demo import resolve_model
        return resolve_model(model)
    return bench_model(size, decoder_type, progress, out_type=out_type)


def decoder_type_of(info) -> str:
    """The type the speech decoder's matrices are stored in (what ran, not what was asked for)."""
    return info.stage_type("decoder")


def same_size(info, size: str) -> bool:
    """Whether a model has the dimensions of the random models of `size` (what the reference and peers
    are built at): comparing across sizes made a tiny model look 151x faster than a 0.6B reference."""
    from ..model_files.random_model import _TALKER
    return info.hparams["talker"]["hidden_size"] == _TALKER[size][0] and \
        info.hparams["talker"]["num_layers"] == _TALKER[size][2]


def shared_checkpoint(size: str, progress: bool = False) -> tuple[Path, str]:
    """A full-size random checkpoint in the released Hugging Face layout, written once: peers read it
    directly, Kazeia through its converter (same weights)."""
    folder = cache_dir() / f"hf-{size}-custom_voice-seed{SHARED_SEED}"
    if not (folder / "config.json").exists():
        if progress:
            print(f"writing the shared {size} checkpoint once: {folder} (0.6B: 2 GB, 1.7B: 4 GB)", file=sys.stderr)
        make_random_checkpoint(folder, size=size, variant="custom_voice", seed=SHARED_SEED)
    return folder, ""


def converted(folder: Path, out_type: str, decoder_type: str, progress: bool) -> Path:
    mix = TypeMix.parse(out_type, fallback="q8_0")
    path = folder.parent / f"{folder.name}-{mix.slug}-dec{decoder_type}.gguf"
    if not path.exists():
        convert(folder, path, out_type=mix, decoder_type=decoder_type, progress=progress)
    return path
