"""Random weights in the released Hugging Face layout, without torch: the folder peer engines read
(vox-tts builds its model from it) and Kazeia converts, so both run the very same weights.

The tensors are exactly the ones Kazeia's converter reads for the variant (names and shapes from the
native tensor table), stored as bf16, with the values `make_random_model` gives the same seed: a
converted folder equals the random model of that seed up to bf16 rounding. Codebooks are written
as `embedding_sum` with a `cluster_usage` of ones. Parts only voice cloning reads (the speech
tokenizer's audio encoder, the decoder quantizer's input projections) are left out.

    folder/config.json  generation_config.json  vocab.json  merges.txt  tokenizer_config.json
    folder/model.safetensors                         (talker.*)
    folder/speech_tokenizer/{config.json, preprocessor_config.json, model.safetensors}   (decoder.*)
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from .convert import expected_tensors
from .metadata import metadata_from_configs
from .random_model import (GENERATION_CONFIG, REAL_TEXT_VOCAB, SIZES, VARIANTS, _TINY_LIKE, _role_values,
                           demo_tokenizer, model_config, speech_tokenizer_config)

# what the released speech tokenizer's preprocessor_config.json holds (Mimi's feature extractor)
PREPROCESSOR_CONFIG = {"feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1, "padding_side": "right",
                       "padding_value": 0.0, "return_attention_mask": True, "sampling_rate": 24000}


def bf16_bytes(values: np.ndarray) -> bytes:
    """f32 -> bf16 bit patterns, rounded to nearest even (as torch rounds)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return rounded.astype(np.uint16).tobytes()


def write_safetensors(path: Path, tensors: Iterable[tuple[str, list[int], Callable[[], np.ndarray]]]) -> None:
    """bf16 safetensors, one tensor at a time (a 0.6B talker is 1.8 GB: never all in memory)."""
    tensors = list(tensors)
    header, offset = {}, 0
    for name, shape, _ in tensors:
        size = 2 * int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)   # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for name, shape, values in tensors:
            data = values()
            if list(data.shape) != list(shape):
                raise ValueError(f"{name}: made {list(data.shape)}, declared {list(shape)}")
            f.write(bf16_bytes(data))


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _write_tokenizer(folder: Path, tok) -> None:
    """vocab.json, merges.txt and tokenizer_config.json (the specials as added tokens) from a
    tokenizers BPE, as the released checkpoints ship them."""
    spec = json.loads(tok.to_str())
    _write_json(folder / "vocab.json", spec["model"]["vocab"])
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    (folder / "merges.txt").write_text("#version: 0.2\n" + "".join(m + "\n" for m in merges), encoding="utf-8")
    added = {str(t["id"]): {"content": t["content"], "lstrip": False, "normalized": False, "rstrip": False,
                            "single_word": False, "special": True} for t in spec["added_tokens"]}
    _write_json(folder / "tokenizer_config.json", {"added_tokens_decoder": added, "model_max_length": 131072,
                                                   "tokenizer_class": "Qwen2Tokenizer"})


def make_random_checkpoint(folder: str | os.PathLike, size: str = "0.6b", variant: str = "custom_voice",
                           seed: int = 0) -> Path:
    """Writes the folder (whole or not at all: built beside it, then renamed) and returns it."""
    if size not in SIZES or variant not in VARIANTS:
        raise ValueError(f"unknown size or variant {size!r} / {variant!r}")
    folder = Path(folder)
    tok, ids, text_vocab = demo_tokenizer(None if size in _TINY_LIKE else REAL_TEXT_VOCAB)
    special = dict(im_start_token_id=ids["<|im_start|>"], im_end_token_id=ids["<|im_end|>"],
                   tts_pad_token_id=ids["<tts_pad>"], tts_bos_token_id=ids["<tts_text_bos>"],
                   tts_eos_token_id=ids["<tts_text_eod>"])
    cfg = model_config(size, variant, text_vocab, special)
    st_cfg = speech_tokenizer_config(size)
    specs = expected_tensors(metadata_from_configs(cfg, GENERATION_CONFIG, st_cfg))

    talker, decoder = [], []
    for spec in specs:
        shape, name, transform = list(spec["shape"]), spec["name"], spec["transform"]
        first = spec["sources"][0]
        (decoder if first.startswith(("decoder.", "encoder.")) else talker).append(
            (first, shape, lambda n=name, s=shape, t=transform: _role_values(n, s, t, seed)))
        if transform == "codebook":   # embedding = embedding_sum / cluster_usage
            decoder.append((spec["sources"][1], shape[:1], lambda s=shape: np.ones(s[:1], np.float32)))

    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "speech_tokenizer").mkdir(parents=True)
    try:
        _write_tokenizer(partial, tok)
        _write_json(partial / "config.json", cfg)
        _write_json(partial / "generation_config.json", GENERATION_CONFIG)
        write_safetensors(partial / "model.safetensors", sorted(talker, key=lambda t: t[0]))
        _write_json(partial / "speech_tokenizer" / "config.json", st_cfg)
        _write_json(partial / "speech_tokenizer" / "preprocessor_config.json", PREPROCESSOR_CONFIG)
        write_safetensors(partial / "speech_tokenizer" / "model.safetensors", sorted(decoder, key=lambda t: t[0]))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(partial, folder)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return folder
