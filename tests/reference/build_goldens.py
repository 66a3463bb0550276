#!/usr/bin/env python3
"""Build Kazeia's golden reference data with the official Qwen3-TTS implementation.

Runs the reference package ``qwen-tts==0.1.1`` (on ``transformers==4.57.3`` and CPU
torch) on tiny random-weight checkpoints written in the released Hugging Face
layout, and records what it computes: prompt ids, talker prefill / step inputs,
logits before and after the logits processors, code-predictor inputs and logits,
greedy codes, the speech decoder's intermediates and waveforms, the speaker
encoder's mel and x-vector and the Mimi encoder's reference codes.  It also
records text-tokenizer cases and an inventory of the real-size checkpoints'
tensors (built on the meta device).

Usage (inside the reference venv, see setup_venv.sh; installs nothing):

    .venv-ref/bin/python tests/reference/build_goldens.py --out tests/golden

Output is deterministic: two runs on the same machine produce identical bytes
(fixed seeds, one torch thread, fixed zip timestamps, no wall-clock values).
See tests/reference/README.md for the file layout.
"""
from __future__ import annotations

import os

# OpenMP spin-waiting makes multi-threaded torch very slow on small shared-vCPU
# machines; the policy is read when torch loads, so set it before any import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import contextlib
import dataclasses
import hashlib
import importlib.machinery
import io
import json
import math
import platform
import shutil
import sys
import tempfile
import time
import types
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import numpy as np

FORMAT_VERSION = 1
SEED = 20240601
TORCH_THREADS = 1  # one thread: reductions happen in one fixed order (--threads: to measure the spread)


# =============================================================================
# Reference imports
# =============================================================================
def _install_optional_module_stubs() -> List[str]:
    """qwen_tts.core imports its 25 Hz tokenizer eagerly, which needs `sox`,
    `onnxruntime` and `torchaudio.compliance.kaldi`.  None of them is used on the
    12 Hz path, so empty placeholder modules stand in for the ones that are not
    installed.  transformers is imported first so that its optional-package
    probes see the real environment, not the placeholders."""
    import transformers  # noqa: F401
    import transformers.utils.import_utils  # noqa: F401

    def placeholder(name: str) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
        return mod

    stubbed = []
    for name in ("sox", "onnxruntime"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = placeholder(name)
            stubbed.append(name)
    try:
        import torchaudio.compliance.kaldi  # noqa: F401
    except ImportError:
        names = ("torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi")
        mods = [placeholder(n) for n in names]
        mods[0].compliance, mods[1].kaldi = mods[1], mods[2]
        sys.modules.update(dict(zip(names, mods)))
        stubbed.append("torchaudio")
    return stubbed


STUBBED_MODULES = _install_optional_module_stubs()

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

from qwen_tts import Qwen3TTSModel  # noqa: E402
from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig  # noqa: E402
from qwen_tts.core.models.modeling_qwen3_tts import (  # noqa: E402
    Qwen3TTSForConditionalGeneration,
    apply_multimodal_rotary_pos_emb,
    mel_spectrogram,
    rotate_half,
)
from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    Qwen3TTSTokenizerV2Config,
)
from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    Qwen3TTSTokenizerV2Model,
)


# =============================================================================
# Constants of the released 12 Hz models (identical in every released config)
# =============================================================================
CODEC_SPECIAL_IDS = {
    "codec_pad_id": 2148, "codec_bos_id": 2149, "codec_eos_token_id": 2150,
    "codec_think_id": 2154, "codec_nothink_id": 2155,
    "codec_think_bos_id": 2156, "codec_think_eos_id": 2157,
}
LANGUAGE_IDS = {
    "chinese": 2055, "english": 2050, "german": 2053, "italian": 2070, "portuguese": 2071,
    "spanish": 2054, "japanese": 2058, "korean": 2064, "french": 2061, "russian": 2069,
}
DIALECT_IDS = {"beijing_dialect": 2074, "sichuan_dialect": 2062}
SPEAKER_IDS = {
    "serena": 3066, "vivian": 3065, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861,
    "ono_anna": 2873, "sohee": 2864, "eric": 2875, "dylan": 2878,
}
SPEAKER_DIALECTS = {name: False for name in SPEAKER_IDS}
SPEAKER_DIALECTS.update(eric="sichuan_dialect", dylan="beijing_dialect")

REAL_TEXT_SPECIAL_IDS = {
    "im_start_token_id": 151644, "im_end_token_id": 151645, "tts_pad_token_id": 151671,
    "tts_bos_token_id": 151672, "tts_eos_token_id": 151673,
}
REAL_ASSISTANT_TOKEN_ID = 77091

# Special tokens appended after the tiny BPE vocabulary, in the real relative order.
TEXT_SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>", "<tts_text_bos_single>",
]

# Released generation_config.json (sampling defaults; custom keys, not HF GenerationConfig).
RELEASED_GENERATION_CONFIG = {
    "do_sample": True, "repetition_penalty": 1.05, "temperature": 0.9, "top_p": 1.0,
    "top_k": 50, "subtalker_dosample": True, "subtalker_temperature": 0.9,
    "subtalker_top_p": 1.0, "subtalker_top_k": 50, "max_new_tokens": 8192,
}

# Settings of every golden generation: greedy talker and sub-talker.
GOLDEN_GENERATION_KWARGS = {
    "do_sample": False, "subtalker_dosample": False,
    "repetition_penalty": 1.05, "max_new_tokens": 25,
}

QWEN2_SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                     r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CP_LOGIT_FRAMES = 3           # code-predictor logits are kept for the first frames only
LONG_DECODE_FRAMES = 400      # > 300 so the reference's chunked decode takes two chunks
REF_AUDIO_SECONDS = 1.3
SAMPLE_RATE = 24000


# =============================================================================
# Model dimensions and config.json builders
# =============================================================================
@dataclass(frozen=True)
class TalkerDims:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    mrope_section: tuple
    text_hidden: int
    cp_hidden: int
    cp_intermediate: int
    cp_layers: int
    cp_heads: int
    cp_kv_heads: int
    cp_head_dim: int
    max_positions: int = 32768


REAL_TALKER = {
    "0b6": TalkerDims(1024, 3072, 28, 16, 8, 128, (24, 20, 20), 2048, 1024, 3072, 5, 16, 8, 128),
    "1b7": TalkerDims(2048, 6144, 28, 16, 8, 128, (24, 20, 20), 2048, 1024, 3072, 5, 16, 8, 128),
}
# D=64 != Dc=32, so the 1.7B-style small_to_mtp_projection exists.
TINY_TALKER = TalkerDims(64, 128, 2, 4, 2, 16, (4, 2, 2), 48, 32, 64, 2, 4, 2, 8)

# Speaker encoder (ECAPA-TDNN): the released configs only carry enc_dim and
# sample_rate; everything else takes the class defaults.  The tiny one is narrower.
TINY_SPEAKER_ENCODER = {
    "mel_dim": 128, "enc_channels": [32, 32, 32, 32, 96], "enc_kernel_sizes": [5, 3, 3, 3, 1],
    "enc_dilations": [1, 2, 3, 4, 1], "enc_attention_channels": 16, "enc_res2net_scale": 4,
    "enc_se_channels": 16,
}


def talker_config(dims: TalkerDims, text_vocab_size: int, model_type: str) -> Dict[str, Any]:
    cfg = {
        "model_type": "qwen3_tts_talker",
        "hidden_size": dims.hidden,
        "intermediate_size": dims.intermediate,
        "num_hidden_layers": dims.layers,
        "num_attention_heads": dims.heads,
        "num_key_value_heads": dims.kv_heads,
        "head_dim": dims.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": dims.max_positions,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000,
        "rope_scaling": {"rope_type": "default", "interleaved": True,
                         "mrope_section": list(dims.mrope_section)},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "sliding_window": None,
        "initializer_range": 0.02,
        "use_cache": True,
        "vocab_size": 3072,
        "text_vocab_size": text_vocab_size,
        "text_hidden_size": dims.text_hidden,
        "num_code_groups": 16,
        "position_id_per_seconds": 13,
        "code_predictor_config": {
            "model_type": "qwen3_tts_talker_code_predictor",
            "hidden_size": dims.cp_hidden,
            "intermediate_size": dims.cp_intermediate,
            "num_hidden_layers": dims.cp_layers,
            "num_attention_heads": dims.cp_heads,
            "num_key_value_heads": dims.cp_kv_heads,
            "head_dim": dims.cp_head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": 65536,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000,
            "rope_scaling": None,
            "attention_bias": False,
            "attention_dropout": 0.0,
            "use_sliding_window": False,
            "sliding_window": None,
            "initializer_range": 0.02,
            "use_cache": True,
            "vocab_size": 2048,
            "num_code_groups": 16,
        },
        **CODEC_SPECIAL_IDS,
    }
    if model_type == "custom_voice":
        cfg["codec_language_id"] = {**LANGUAGE_IDS, **DIALECT_IDS}
        cfg["spk_id"] = dict(SPEAKER_IDS)
        cfg["spk_is_dialect"] = dict(SPEAKER_DIALECTS)
    else:
        cfg["codec_language_id"] = dict(LANGUAGE_IDS)
        cfg["spk_id"] = {}
        cfg["spk_is_dialect"] = {}
    return cfg


def model_config(dims: TalkerDims, *, model_type: str, size_tag: str, text_vocab_size: int,
                 text_special_ids: Dict[str, int], assistant_token_id: int,
                 speaker_encoder: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """config.json of a TTS model, shaped like the released files."""
    cfg = {
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "model_type": "qwen3_tts",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "tts_model_size": size_tag,
        "tts_model_type": model_type,
        "assistant_token_id": assistant_token_id,
        **text_special_ids,
        "talker_config": talker_config(dims, text_vocab_size, model_type),
    }
    if model_type == "base":
        cfg["speaker_encoder_config"] = {"enc_dim": dims.hidden, "sample_rate": SAMPLE_RATE,
                                         **(speaker_encoder or {})}
    cfg["dtype"] = "bfloat16"
    cfg["transformers_version"] = "4.57.3"
    return cfg


def speech_tokenizer_config(tiny: bool) -> Dict[str, Any]:
    """speech_tokenizer/config.json (Qwen3TTSTokenizerV2Config: Mimi encoder + decoder)."""
    if tiny:
        enc = dict(hidden_size=32, num_filters=4, codebook_dim=8,
                   vector_quantization_hidden_dimension=8, upsample_groups=32,
                   num_hidden_layers=2, intermediate_size=64, num_attention_heads=4,
                   num_key_value_heads=4, head_dim=8)
        dec = dict(latent_dim=48, codebook_dim=16, decoder_dim=64, hidden_size=32,
                   intermediate_size=64, num_attention_heads=4, num_key_value_heads=4,
                   head_dim=16, num_hidden_layers=2, vector_quantization_hidden_dimension=16)
    else:
        enc = dict(hidden_size=512, num_filters=64, codebook_dim=256,
                   vector_quantization_hidden_dimension=256, upsample_groups=512,
                   num_hidden_layers=8, intermediate_size=2048, num_attention_heads=8,
                   num_key_value_heads=8, head_dim=64)
        dec = dict(latent_dim=1024, codebook_dim=512, decoder_dim=1536, hidden_size=512,
                   intermediate_size=1024, num_attention_heads=16, num_key_value_heads=16,
                   head_dim=64, num_hidden_layers=8, vector_quantization_hidden_dimension=512)
    encoder_config = {
        "model_type": "mimi", "sampling_rate": SAMPLE_RATE, "frame_rate": 12.5,
        "audio_channels": 1, "num_residual_layers": 1, "upsampling_ratios": [8, 6, 5, 4],
        "kernel_size": 7, "last_kernel_size": 3, "residual_kernel_size": 3,
        "dilation_growth_rate": 2, "use_causal_conv": True, "pad_mode": "constant",
        "compress": 2, "trim_right_ratio": 1.0, "codebook_size": 2048, "num_quantizers": 32,
        "num_semantic_quantizers": 1, "use_conv_shortcut": False, "hidden_act": "gelu",
        "max_position_embeddings": 8000, "norm_eps": 1e-05, "rope_theta": 10000.0,
        "sliding_window": 250, "layer_scale_initial_scale": 0.01, "use_cache": False,
        **enc,
    }
    decoder_config = {
        "attention_bias": False, "codebook_size": 2048, "hidden_act": "silu",
        "layer_scale_initial_scale": 0.01, "max_position_embeddings": 8000,
        "num_quantizers": 16, "num_semantic_quantizers": 1, "rms_norm_eps": 1e-05,
        "rope_theta": 10000, "semantic_codebook_size": 4096, "sliding_window": 72,
        "upsample_rates": [8, 5, 4, 3], "upsampling_ratios": [2, 2],
        **dec,
    }
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": 16,
        "input_sample_rate": SAMPLE_RATE,
        "output_sample_rate": SAMPLE_RATE,
        "encode_downsample_rate": 1920,
        "decode_upsample_rate": 1920,
        "encoder_config": encoder_config,
        "decoder_config": decoder_config,
        "dtype": "bfloat16",
        "transformers_version": "4.57.3",
    }


SPEECH_PREPROCESSOR_CONFIG = {
    "feature_extractor_type": "EncodecFeatureExtractor", "feature_size": 1,
    "sampling_rate": SAMPLE_RATE, "padding_side": "right", "padding_value": 0.0,
    "return_attention_mask": True, "chunk_length_s": None, "overlap": None,
}


def instantiate_tts_model(cfg: Dict[str, Any]) -> Qwen3TTSForConditionalGeneration:
    kwargs = {k: v for k, v in cfg.items() if k not in ("architectures", "dtype", "transformers_version")}
    return Qwen3TTSForConditionalGeneration(Qwen3TTSConfig(**kwargs))


def instantiate_speech_tokenizer(cfg: Dict[str, Any]) -> Qwen3TTSTokenizerV2Model:
    kwargs = {k: v for k, v in cfg.items() if k not in ("architectures", "dtype", "transformers_version")}
    return Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config(**kwargs))


# =============================================================================
# Deterministic writers
# =============================================================================
def write_json(path: str, obj: Any) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, indent=1, ensure_ascii=False)
        f.write("\n")


def write_npz(path: str, arrays: Dict[str, np.ndarray]) -> None:
    """np.savez_compressed-compatible archive with fixed zip timestamps, so the
    same arrays always give the same bytes (numpy stamps entries with now())."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue(), compresslevel=9)


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def f32(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


def i64(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.int64).cpu().numpy()


# =============================================================================
# Random weights
# =============================================================================
def fill_random_(module: torch.nn.Module, seed: int, overrides: Optional[Dict[str, float]] = None) -> None:
    """Give every floating tensor of the state dict (parameters and persistent
    buffers, e.g. codebooks) deterministic, well-scaled random values, rounded to
    bf16 so the bf16 checkpoint and the fp32 reference hold identical numbers.

    Each tensor draws from its own generator seeded by (seed, name), so the values
    of a tensor do not depend on which other tensors the model has: the three
    variants share their talker weights by construction.  `overrides` maps a
    name suffix to an extra multiplier."""
    state = module.state_dict()
    new = {}
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            new[name] = tensor
            continue
        g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        shape = tensor.shape
        leaf = name.rsplit(".", 1)[-1]

        def normal(std: float, mean: float = 0.0) -> torch.Tensor:
            return mean + std * torch.randn(shape, generator=g)

        if leaf == "initialized":                    # Mimi codebook flag
            value = torch.ones(shape)
        elif leaf == "cluster_usage":                # codebook = embedding_sum / usage
            value = 0.5 + torch.rand(shape, generator=g)
        elif leaf in ("embedding_sum", "embed_sum"):
            value = normal(1.0)
        elif leaf in ("alpha", "beta"):              # SnakeBeta, stored as logs
            value = normal(0.3)
        elif leaf in ("scale", "gamma"):             # layer scales, ConvNeXt gamma
            value = normal(0.05, 0.2)
        elif tensor.dim() == 1 and leaf == "weight":  # norm weights
            value = normal(0.1, 1.0)
        elif tensor.dim() == 1:                      # biases
            value = normal(0.05)
        else:                                        # linear / conv / embedding
            fan_in = int(np.prod(shape[1:]))
            value = normal(1.0 / math.sqrt(max(fan_in, 1)))
        for suffix, factor in (overrides or {}).items():
            if name.endswith(suffix):
                value = value * factor
        new[name] = value.to(torch.bfloat16).to(tensor.dtype)
    module.load_state_dict(new, strict=True)


# =============================================================================
# Tiny text tokenizer (Qwen2 byte-level BPE)
# =============================================================================
BPE_TRAINING_CORPUS = (
    ["assistant\n", "user\n", "assistant", "user", "system"] * 40
    + ["Hello world, this is a tiny golden test for the speech engine.",
       "The quick brown fox jumps over the lazy dog.",
       "A calm, warm voice speaking slowly and clearly.",
       "Hello there, nice to meet you.",
       "Speech synthesis with random weights sounds like noise, but the numbers must match.",
       "She sells sea shells by the sea shore; the shells she sells are surely seashells.",
       "Numbers like 2024 and 3.14 are split into single digits.",
       "你好，世界。今天天气很好。我们一起说话吧。",
       "こんにちは、世界。",
       "Guten Tag! Wie geht es dir?"] * 6
    # CamelCase and contractions, so that some merges span the boundaries where the
    # Mistral split regex cuts but the Qwen2 one does not (see tokenizer_cases.json)
    + ["iPhone HelloWorld getHTTPResponse XMLParser McDonald", "'tis 'twas DON'T we're I'll"] * 8
)
BPE_VOCAB_SIZE = 512  # 256 byte symbols + merges


def build_text_tokenizer(out_dir: str) -> Dict[str, Any]:
    """Train a byte-level BPE with the Qwen2 pre-tokenizer and write it the way
    the released checkpoints ship it: vocab.json + merges.txt + tokenizer_config.json
    (no tokenizer.json; transformers converts the slow files into a fast tokenizer)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB_SIZE, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(BPE_TRAINING_CORPUS, trainer)
    model = json.loads(tok.to_str())["model"]
    vocab = dict(sorted(model["vocab"].items(), key=lambda kv: kv[1]))
    assert list(vocab.values()) == list(range(len(vocab))), "BPE ids are not dense"
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(vocab, f, ensure_ascii=False, separators=(",", ":"))
    with open(os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("#version: 0.2\n")
        f.write("".join(m + "\n" for m in merges))

    special_ids = {s: len(vocab) + i for i, s in enumerate(TEXT_SPECIAL_TOKENS)}
    added = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                      "single_word": False, "special": True} for s, i in special_ids.items()}
    write_json(os.path.join(out_dir, "tokenizer_config.json"), {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": TEXT_SPECIAL_TOKENS[1:],
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    })
    return {"bpe_vocab_size": len(vocab), "num_merges": len(merges), "special_ids": special_ids,
            "assistant_id": vocab["assistant"], "user_id": vocab["user"], "newline_id": vocab["Ċ"]}


TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")


# =============================================================================
# Checkpoints
# =============================================================================
def save_bf16_weights(model: torch.nn.Module, out_dir: str) -> List[str]:
    """model.safetensors through transformers' own save_pretrained (as released),
    then drop everything else it wrote; configs are written by hand."""
    model = model.to(torch.bfloat16)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        shutil.copyfile(os.path.join(tmp, "model.safetensors"), os.path.join(out_dir, "model.safetensors"))
    with safe_open(os.path.join(out_dir, "model.safetensors"), "pt") as f:
        saved = sorted(f.keys())
    expected = sorted(model.state_dict().keys())
    assert saved == expected, f"save_pretrained dropped/renamed tensors: {set(expected) ^ set(saved)}"
    return saved


@dataclass
class TinyCheckpoints:
    root: str
    dirs: Dict[str, str]
    text_vocab_size: int
    tokenizer_info: Dict[str, Any]
    text_special_ids: Dict[str, int]
    configs: Dict[str, Dict[str, Any]]


VARIANTS = ("custom_voice", "voice_design", "base")
TINY_SIZE_TAG = "1b7"  # tiny, but shaped like 1.7B (D != Dc); "0b6" would drop CustomVoice instructions


def build_tiny_checkpoints(out: str) -> TinyCheckpoints:
    root = os.path.join(out, "checkpoints")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    with tempfile.TemporaryDirectory() as scratch:
        tok_dir = os.path.join(scratch, "text_tokenizer")
        tok_info = build_text_tokenizer(tok_dir)
        sid = tok_info["special_ids"]
        text_vocab_size = int(math.ceil((tok_info["bpe_vocab_size"] + len(sid)) / 64) * 64)
        text_special = {
            "im_start_token_id": sid["<|im_start|>"], "im_end_token_id": sid["<|im_end|>"],
            "tts_pad_token_id": sid["<tts_pad>"], "tts_bos_token_id": sid["<tts_text_bos>"],
            "tts_eos_token_id": sid["<tts_text_eod>"],
        }

        st_cfg = speech_tokenizer_config(tiny=True)
        st_model = instantiate_speech_tokenizer(st_cfg).eval()
        # damped residual branches and a small output conv keep the random vocoder's
        # activations moderate and its waveform mostly inside the [-1, 1] clamp
        fill_random_(st_model, SEED + 1, overrides={"conv2.conv.weight": 0.3,
                                                     "decoder.decoder.6.conv.weight": 0.25})
        st_dir = os.path.join(scratch, "speech_tokenizer")
        os.makedirs(st_dir)
        save_bf16_weights(st_model, st_dir)
        write_json(os.path.join(st_dir, "config.json"), st_cfg)
        write_json(os.path.join(st_dir, "preprocessor_config.json"), SPEECH_PREPROCESSOR_CONFIG)
        del st_model

        dirs, configs = {}, {}
        for variant in VARIANTS:
            cfg = model_config(TINY_TALKER, model_type=variant, size_tag=TINY_SIZE_TAG,
                               text_vocab_size=text_vocab_size, text_special_ids=text_special,
                               assistant_token_id=tok_info["assistant_id"],
                               speaker_encoder=TINY_SPEAKER_ENCODER)
            model = instantiate_tts_model(cfg).eval()
            fill_random_(model, SEED + 2)
            d = os.path.join(root, f"tiny-{variant}")
            os.makedirs(d)
            save_bf16_weights(model, d)
            del model
            write_json(os.path.join(d, "config.json"), cfg)
            write_json(os.path.join(d, "generation_config.json"), RELEASED_GENERATION_CONFIG)
            for name in TOKENIZER_FILES:
                shutil.copyfile(os.path.join(tok_dir, name), os.path.join(d, name))
            shutil.copytree(st_dir, os.path.join(d, "speech_tokenizer"))
            dirs[variant], configs[variant] = d, cfg
    configs["speech_tokenizer"] = st_cfg
    return TinyCheckpoints(root, dirs, text_vocab_size, tok_info, text_special, configs)


def load_wrapper(ckpt_dir: str) -> Qwen3TTSModel:
    """Exactly how a user loads the reference (AutoModel + AutoProcessor with
    fix_mistral_regex=True), in fp32 with eager attention."""
    return Qwen3TTSModel.from_pretrained(ckpt_dir, dtype=torch.float32, attn_implementation="eager")


# =============================================================================
# Capturing what the reference computes
# =============================================================================
class _Patches:
    """Forward hooks and instance-attribute patches that are undone on exit."""

    def __init__(self):
        self._handles, self._attrs = [], []

    def hook(self, handle) -> None:
        self._handles.append(handle)

    def patch(self, obj: Any, name: str, make: Callable[[Callable], Callable]) -> None:
        assert name not in vars(obj), f"{name} is already patched"
        self._attrs.append((obj, name))
        setattr(obj, name, make(getattr(obj, name)))

    def undo(self) -> None:
        for h in self._handles:
            h.remove()
        for obj, name in reversed(self._attrs):
            delattr(obj, name)
        self._handles, self._attrs = [], []


class GenerationTrace(contextlib.AbstractContextManager):
    """Records, during one Qwen3TTSModel.generate_* call, every tensor a
    re-implementation has to reproduce (see `arrays`)."""

    def __init__(self, wrapper: Qwen3TTSModel):
        self.w = wrapper
        self.p = _Patches()
        self.talker_in, self.talker_pos, self.talker_hidden = [], [], []
        self.talker_logits, self.talker_scores = [], []
        self.cp_in, self.cp_in_talker_space, self.cp_logits = [], [], []
        self.generate_kwargs = self.talker_kwargs = self.sequences = None
        self.codes = None
        self.decode_calls = []

    def __enter__(self):
        from transformers import LogitsProcessor, LogitsProcessorList

        model = self.w.model
        talker = model.talker
        cp = talker.code_predictor
        p = self.p

        def talker_pre(mod, args, kwargs):
            self.talker_in.append(kwargs["inputs_embeds"].detach().clone())
            self.talker_pos.append(kwargs["position_ids"].detach().clone())

        def talker_post(mod, args, kwargs, out):
            self.talker_hidden.append(out.last_hidden_state[:, -1].detach().clone())

        def head_post(mod, args, out):
            self.talker_logits.append(out[:, -1].detach().clone())

        def proj_pre(mod, args):
            self.cp_in_talker_space.append(args[0].detach().clone())

        def cp_pre(mod, args, kwargs):
            self.cp_in.append(kwargs["inputs_embeds"].detach().clone())

        def cp_post(mod, args, kwargs, out):
            self.cp_logits.append(out.logits[:, -1].detach().clone())

        p.hook(talker.model.register_forward_pre_hook(talker_pre, with_kwargs=True))
        p.hook(talker.model.register_forward_hook(talker_post, with_kwargs=True))
        p.hook(talker.codec_head.register_forward_hook(head_post))
        p.hook(cp.small_to_mtp_projection.register_forward_pre_hook(proj_pre))
        p.hook(cp.model.register_forward_pre_hook(cp_pre, with_kwargs=True))
        p.hook(cp.register_forward_hook(cp_post, with_kwargs=True))

        trace = self

        class CaptureScores(LogitsProcessor):
            """Appended after HF's own processors (repetition penalty, min length,
            suppress tokens): sees the final scores the greedy argmax is taken on."""

            def __call__(self, input_ids, scores):
                trace.talker_scores.append(scores.detach().clone())
                return scores

        def wrap_talker_generate(orig):
            def generate(*args, **kwargs):
                assert "logits_processor" not in kwargs
                self.talker_kwargs = {k: kwargs[k] for k in ("trailing_text_hidden", "tts_pad_embed")}
                out = orig(*args, logits_processor=LogitsProcessorList([CaptureScores()]), **kwargs)
                self.sequences = out.sequences.detach().clone()
                return out
            return generate

        def wrap_model_generate(orig):
            def generate(*args, **kwargs):
                self.generate_kwargs = kwargs
                codes, hidden = orig(*args, **kwargs)
                self.codes = codes[0].detach().clone()
                return codes, hidden
            return generate

        def wrap_decode(orig):
            def decode(encoded):
                wavs, sr = orig(encoded)
                self.decode_calls.append(([e["audio_codes"] for e in encoded], wavs, sr))
                return wavs, sr
            return decode

        p.patch(talker, "generate", wrap_talker_generate)
        p.patch(model, "generate", wrap_model_generate)
        p.patch(model.speech_tokenizer, "decode", wrap_decode)
        return self

    def __exit__(self, *exc):
        self.p.undo()
        return False

    def arrays(self) -> Dict[str, np.ndarray]:
        kw = self.generate_kwargs
        d: Dict[str, np.ndarray] = {"input_ids": i64(kw["input_ids"][0][0])}
        for key in ("instruct_ids", "ref_ids"):
            ids = kw.get(key)
            if ids is not None and ids[0] is not None:
                d[key] = i64(ids[0][0])
        steps = len(self.talker_in) - 1
        d["talker_prefill_embeds"] = f32(self.talker_in[0][0])                            # [L, D]
        d["talker_prefill_position_ids"] = i64(self.talker_pos[0][:, 0])                  # [3, L]
        d["talker_step_embeds"] = f32(torch.cat([x[0] for x in self.talker_in[1:]]))      # [S, D]
        d["talker_step_position_ids"] = i64(torch.cat([x[:, 0] for x in self.talker_pos[1:]], 1))  # [3, S]
        d["talker_trailing_text_embeds"] = f32(self.talker_kwargs["trailing_text_hidden"][0])   # [n, D]
        d["tts_pad_embed"] = f32(self.talker_kwargs["tts_pad_embed"].reshape(-1))          # [D]
        d["talker_last_hidden"] = f32(torch.cat(self.talker_hidden))                      # [S+1, D]
        d["talker_logits_raw"] = f32(torch.cat(self.talker_logits))                       # [S+1, V]
        d["talker_scores_processed"] = f32(torch.cat(self.talker_scores))                 # [S+1, V]
        d["talker_sampled_ids"] = i64(self.sequences[0])                                  # [S+1]
        assert d["talker_logits_raw"].shape[0] == steps + 1 == d["talker_scores_processed"].shape[0]
        assert steps == self.codes.shape[0], "one talker step per emitted frame"

        groups = self.w.model.talker.config.num_code_groups - 1      # 15 calls per frame
        frames = min(CP_LOGIT_FRAMES, len(self.cp_logits) // groups)
        assert len(self.cp_logits) == len(self.cp_in) == len(self.cp_in_talker_space)

        def per_frame(seq, first: bool):
            rows = []
            for f in range(frames):
                calls = seq[f * groups:(f + 1) * groups]
                rows.append(calls[0][0] if first else torch.cat([c[0] for c in calls[1:]]))
            return f32(torch.stack(rows))

        d["cp_prefill_inputs"] = per_frame(self.cp_in, True)                              # [f, 2, Dc]
        d["cp_step_inputs"] = per_frame(self.cp_in, False)                                # [f, 14, Dc]
        d["cp_prefill_inputs_talker_space"] = per_frame(self.cp_in_talker_space, True)    # [f, 2, D]
        d["cp_step_inputs_talker_space"] = per_frame(self.cp_in_talker_space, False)      # [f, 14, D]
        d["cp_logits"] = f32(torch.stack(self.cp_logits[:frames * groups])[:, 0]).reshape(
            frames, groups, -1)                                                           # [f, 15, 2048]
        d["codes"] = i64(self.codes)                                                      # [frames, 16]
        return d


class DecoderTrace(contextlib.AbstractContextManager):
    """Records every intermediate of Qwen3TTSTokenizerV2Decoder.forward (one call)."""

    def __init__(self, decoder: torch.nn.Module):
        self.dec = decoder
        self.p = _Patches()
        self.stages: Dict[str, np.ndarray] = {}
        self.calls = 0

    def _record(self, name: str, transform=lambda t: t):
        def hook(mod, args, out):
            if self.calls == 1:
                self.stages[name] = f32(transform(out))
        return hook

    def __enter__(self):
        dec, p = self.dec, self.p

        def count(mod, args):
            self.calls += 1
            if self.calls == 1:
                self.stages["codes"] = i64(args[0])                       # [1, 16, T]

        def wrap_quantizer(orig):
            def decode(codes):
                out = orig(codes)
                if self.calls == 1:
                    self.stages["quantizer_out"] = f32(out)               # [1, codebook_dim, T]
                return out
            return decode

        p.hook(dec.register_forward_pre_hook(count))
        p.patch(dec.quantizer, "decode", wrap_quantizer)
        p.hook(dec.pre_conv.register_forward_hook(self._record("pre_conv_out")))
        tr = dec.pre_transformer
        p.hook(tr.input_proj.register_forward_hook(self._record("pre_transformer_input_proj_out")))
        for i, layer in enumerate(tr.layers):
            p.hook(layer.register_forward_hook(self._record(f"pre_transformer_layer_{i}_out")))
        p.hook(tr.norm.register_forward_hook(self._record("pre_transformer_norm_out")))
        p.hook(tr.output_proj.register_forward_hook(self._record("pre_transformer_out")))
        for i, blocks in enumerate(dec.upsample):
            p.hook(blocks[0].register_forward_hook(self._record(f"upsample_{i}_transconv")))
            p.hook(blocks[1].register_forward_hook(self._record(f"upsample_{i}_convnext")))
        n = len(dec.decoder)
        for i, block in enumerate(dec.decoder):
            if i == 0:
                name = "decoder_0_conv_in"
            elif i == n - 2:
                name = f"decoder_{i}_snake"
            elif i == n - 1:
                name = "wav_preclamp"
            else:
                name = f"decoder_{i}_block"
            p.hook(block.register_forward_hook(self._record(name)))

        def final(mod, args, out):
            if self.calls == 1:
                self.stages["wav"] = f32(out)                             # [1, 1, N]
        p.hook(dec.register_forward_hook(final))
        return self

    def __exit__(self, *exc):
        self.p.undo()
        return False


# =============================================================================
# Generation cases
# =============================================================================
@dataclass(frozen=True)
class Case:
    name: str
    variant: str
    text: str
    language: str
    non_streaming_mode: bool          # False = streaming text feeding (the Base default)
    speaker: Optional[str] = None
    instruct: Optional[str] = None
    ref_text: Optional[str] = None
    x_vector_only_mode: bool = False

    @property
    def text_feeding(self) -> str:
        return "non_streaming" if self.non_streaming_mode else "streaming"


REF_TEXT = "Hello there, nice to meet you."
BASE_TEXT = "Speech synthesis with random weights sounds like noise, but the numbers must match."
CASES = [
    Case("cv_vivian_english_nonstream", "custom_voice",
         "Hello world, this is a tiny golden test for the speech engine.", "English", True,
         speaker="Vivian"),
    # Dylan is a Beijing-dialect speaker: language "Chinese" becomes beijing_dialect.
    Case("cv_dylan_chinese_stream", "custom_voice", "你好，世界。今天天气很好。Hello there.",
         "Chinese", False, speaker="Dylan"),
    Case("vd_auto_nonstream", "voice_design", "The quick brown fox jumps over the lazy dog.",
         "Auto", True, instruct="A calm, warm voice speaking slowly and clearly."),
    Case("base_icl_stream", "base", BASE_TEXT, "English", False, ref_text=REF_TEXT),
    Case("base_icl_nonstream", "base", BASE_TEXT, "English", True, ref_text=REF_TEXT),
    Case("base_xvec_stream", "base", BASE_TEXT, "Auto", False, x_vector_only_mode=True),
]
DECODER_STAGES_CASE = "cv_vivian_english_nonstream"


def reference_audio() -> np.ndarray:
    """1.3 s deterministic voice-like test signal (24 kHz mono float32)."""
    t = np.arange(int(REF_AUDIO_SECONDS * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = 140.0 + 40.0 * np.sin(2 * np.pi * 1.5 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 6))
    envelope = 0.5 * (1 - np.cos(2 * np.pi * np.minimum(t / 0.1, 1.0) / 2))
    rng = np.random.default_rng(SEED)
    wav = 0.25 * envelope * voiced * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) + 0.02 * rng.standard_normal(t.shape)
    return wav.astype(np.float32)


def effective_prompt_settings(case: Case, cfg: Dict[str, Any]) -> Dict[str, Any]:
    """The codec tags the reference puts into the prompt (for the manifest)."""
    tc = cfg["talker_config"]
    lang = case.language.lower()
    lang_id = None if lang == "auto" else tc["codec_language_id"][lang]
    dialect = None
    if case.speaker and lang in ("chinese", "auto") and tc["spk_is_dialect"].get(case.speaker.lower()):
        dialect = tc["spk_is_dialect"][case.speaker.lower()]
        lang_id = tc["codec_language_id"][dialect]
    return {
        "codec_language_id": lang_id,
        "dialect_override": dialect,
        "speaker_codec_id": tc["spk_id"][case.speaker.lower()] if case.speaker else None,
        "speaker_vector": ("x_vector" if case.variant == "base"
                           else "codec_embedding" if case.speaker else None),
        "icl": case.variant == "base" and not case.x_vector_only_mode,
    }


def run_case(w: Qwen3TTSModel, case: Case, voice_items=None) -> Dict[str, Any]:
    gen = dict(GOLDEN_GENERATION_KWARGS)
    with GenerationTrace(w) as trace:
        if case.variant == "custom_voice":
            wavs, sr = w.generate_custom_voice(text=case.text, speaker=case.speaker, language=case.language,
                                               instruct=case.instruct, non_streaming_mode=case.non_streaming_mode,
                                               **gen)
        elif case.variant == "voice_design":
            wavs, sr = w.generate_voice_design(text=case.text, instruct=case.instruct, language=case.language,
                                               non_streaming_mode=case.non_streaming_mode, **gen)
        else:
            wavs, sr = w.generate_voice_clone(text=case.text, language=case.language,
                                              voice_clone_prompt=voice_items,
                                              non_streaming_mode=case.non_streaming_mode, **gen)
    assert trace.generate_kwargs["non_streaming_mode"] == case.non_streaming_mode
    arrays = trace.arrays()
    arrays["wav"] = np.asarray(wavs[0], dtype=np.float32)
    assert len(trace.decode_calls) == 1
    codes_in, wavs_dec, _ = trace.decode_calls[0]
    if case.variant == "base" and not case.x_vector_only_mode:
        # the wrapper decodes [ref_code; codes] and cuts the reference part proportionally
        arrays["wav_with_ref"] = np.asarray(wavs_dec[0], dtype=np.float32)
    return {"arrays": arrays, "sample_rate": int(sr), "trace": trace}


# =============================================================================
# Tokenizer cases
# =============================================================================
TOKENIZER_TEXTS = [
    ("english", "Hello world, this is a tiny golden test."),
    ("camel_case", "iPhone HelloWorld getHTTPResponse XMLParser"),
    ("camel_case_partial", "myiPhone HelloWorlds are XMLParsers, McDonald's"),
    ("contractions", "DON'T we're I'll she's they've you'd I'M"),
    ("digits", "3.14/2 and 12345, 1,000,000 or 2024-01-31"),
    ("cjk", "你好，世界。今天天气很好！"),
    ("japanese_korean", "こんにちは世界 안녕하세요"),
    ("emoji", "😀👍🏽 ok 🇯🇵"),
    ("combining_marks", "naïve café cafe\u0301 हिन्दी"),
    ("whitespace", "  two  spaces\tand\ttabs\n\nnew lines\r\n  trailing   "),
    ("punctuation", "Wait... what?! (yes) [no] {maybe} \"quoted\" -- dash/slash"),
    ("mixed_script", "Kazeia说：Hello, 世界! 123abc"),
    ("special_tokens_inline", "<|im_start|>user\nhi<|im_end|>\n<tts_pad><tts_text_bos>"),
]


def _split_regex_of(tok) -> Optional[str]:
    pre = json.loads(tok.backend_tokenizer.to_str()).get("pre_tokenizer") or {}
    items = pre.get("pretokenizers", [pre])
    for item in items:
        if item.get("type") == "Split":
            return item["pattern"].get("Regex") or item["pattern"].get("String")
    return None


def _regex_kind(pattern: Optional[str]) -> str:
    if pattern == QWEN2_SPLIT_REGEX:
        return "qwen2"
    if pattern and pattern.startswith(r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*"):
        return "mistral"
    return "other"


def _pretokens(tok, text: str) -> List[str]:
    bt = tok.backend_tokenizer
    normalized = bt.normalizer.normalize_str(text) if bt.normalizer else text
    return [piece for piece, _ in bt.pre_tokenizer.pre_tokenize_str(normalized)]


def _tokenizer_info(tok, how: str) -> Dict[str, Any]:
    pattern = _split_regex_of(tok)
    return {"how": how, "class": type(tok).__name__, "vocab_size": tok.vocab_size, "len": len(tok),
            "split_regex": pattern, "split_regex_kind": _regex_kind(pattern),
            "fix_mistral_regex_attr": getattr(tok, "fix_mistral_regex", None)}


def tokenizer_cases(w: Qwen3TTSModel, ckpt_dir: str) -> Dict[str, Any]:
    """Ids of every test text (and of the wrapper's prompt strings) by
      wrapper:         the reference wrapper's own processor (Qwen3TTSModel._tokenize_texts),
      qwen2_fast:      AutoTokenizer.from_pretrained(dir) (Qwen2TokenizerFast, no mistral fix),
      qwen2_slow:      Qwen2Tokenizer (pure Python, `regex` package),
      mistral_patched: the same fast tokenizer after transformers' own
                       _patch_mistral_regex(fix_mistral_regex=True), i.e. what the wrapper
                       does for a local folder whose vocab has > 100 000 entries."""
    from transformers import AutoTokenizer, Qwen2Tokenizer

    fast = AutoTokenizer.from_pretrained(ckpt_dir)
    slow = Qwen2Tokenizer.from_pretrained(ckpt_dir)
    patched = type(fast)._patch_mistral_regex(
        AutoTokenizer.from_pretrained(ckpt_dir), ckpt_dir, _is_local=True,
        init_kwargs={"fix_mistral_regex": True}, fix_mistral_regex=True)
    wrapper_tok = w.processor.tokenizer
    tokenizers_used = {
        "wrapper": _tokenizer_info(
            wrapper_tok, "Qwen3TTSModel.from_pretrained(dir).processor "
                         "(AutoProcessor.from_pretrained(dir, fix_mistral_regex=True))"),
        "qwen2_fast": _tokenizer_info(fast, "AutoTokenizer.from_pretrained(dir)"),
        "qwen2_slow": {"how": "Qwen2Tokenizer.from_pretrained(dir)", "class": type(slow).__name__,
                       "vocab_size": slow.vocab_size, "len": len(slow),
                       "split_regex": getattr(slow.pat, "pattern", None), "split_regex_kind": "qwen2"},
        "mistral_patched": _tokenizer_info(
            patched, "PreTrainedTokenizerBase._patch_mistral_regex(AutoTokenizer.from_pretrained(dir), "
                     "dir, _is_local=True, fix_mistral_regex=True)"),
    }

    def encode_all(text: str) -> Dict[str, List[int]]:
        return {
            "wrapper": [int(i) for i in w._tokenize_texts([text])[0][0]],
            "qwen2_fast": fast(text)["input_ids"],
            "qwen2_slow": slow(text)["input_ids"],
            "mistral_patched": patched(text)["input_ids"],
        }

    texts = list(TOKENIZER_TEXTS)
    for case in CASES:   # the exact prompt strings the wrapper builds
        texts.append((f"prompt_{case.name}", w._build_assistant_text(case.text)))
        if case.instruct:
            texts.append((f"instruct_{case.name}", w._build_instruct_text(case.instruct)))
    texts.append(("ref_text_prompt", w._build_ref_text(REF_TEXT)))

    entries = []
    for name, text in texts:
        ids = encode_all(text)
        entry = {"name": name, "text": text, "ids": ids,
                 "tokens": fast.convert_ids_to_tokens(ids["qwen2_fast"]),
                 "decoded": fast.decode(ids["qwen2_fast"])}
        if not any(s in text for s in TEXT_SPECIAL_TOKENS):
            entry["pretokens"] = {"qwen2": _pretokens(fast, text), "mistral": _pretokens(patched, text)}
        entry["wrapper_equals_qwen2"] = ids["wrapper"] == ids["qwen2_fast"]
        entry["qwen2_fast_equals_slow"] = ids["qwen2_fast"] == ids["qwen2_slow"]
        entry["mistral_differs"] = ids["mistral_patched"] != ids["qwen2_fast"]
        entries.append(entry)
    return {"tokenizers": tokenizers_used, "texts": entries}


def probe_large_vocab_regex(tiny_dir: str) -> Dict[str, Any]:
    """Which split regex does the wrapper's AutoProcessor(fix_mistral_regex=True)
    activate for a LOCAL folder whose vocab has > 100 000 entries, like the
    released checkpoints (151 643)?  A scratch folder: the tiny BPE plus unreachable
    filler entries, next to a config.json carrying a given transformers_version."""
    from transformers import AutoProcessor

    with open(os.path.join(tiny_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    n_fill = 100_001 - len(vocab)
    vocab.update({f"<filler_{i}>": len(vocab) + i for i in range(n_fill)})
    with open(os.path.join(tiny_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        tok_cfg = json.load(f)
    shift = n_fill
    tok_cfg["added_tokens_decoder"] = {str(int(k) + shift): v for k, v in tok_cfg["added_tokens_decoder"].items()}
    with open(os.path.join(tiny_dir, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    result = {"vocab_size": len(vocab), "note": "scratch folder, not written to the goldens"}
    with tempfile.TemporaryDirectory() as tmp:
        write_json(os.path.join(tmp, "vocab.json"), vocab)
        shutil.copyfile(os.path.join(tiny_dir, "merges.txt"), os.path.join(tmp, "merges.txt"))
        write_json(os.path.join(tmp, "tokenizer_config.json"), tok_cfg)
        for version in ("4.57.3", "4.57.2"):
            write_json(os.path.join(tmp, "config.json"), {**cfg, "transformers_version": version})
            proc = AutoProcessor.from_pretrained(tmp, fix_mistral_regex=True)
            kind = _regex_kind(_split_regex_of(proc.tokenizer))
            result[f"transformers_version_{version}"] = kind
    return result


# =============================================================================
# Real-size inventory
# =============================================================================
SIZE_NAMES = {"0b6": "0.6b", "1b7": "1.7b"}


def real_configs() -> Dict[str, Dict[str, Any]]:
    """config.json dicts of the released models, keyed "0.6b-base" ... "1.7b-voice_design"."""
    cfgs = {}
    for size in ("0b6", "1b7"):
        for variant in ("base", "custom_voice", "voice_design"):
            if variant == "voice_design" and size == "0b6":
                continue  # there is no 0.6B VoiceDesign release
            cfgs[f"{SIZE_NAMES[size]}-{variant}"] = model_config(
                REAL_TALKER[size], model_type=variant, size_tag=size, text_vocab_size=151936,
                text_special_ids=REAL_TEXT_SPECIAL_IDS, assistant_token_id=REAL_ASSISTANT_TOKEN_ID)
    return cfgs


def _meta_inventory(model: torch.nn.Module, cfg: Dict[str, Any], file: str) -> Dict[str, Any]:
    sd = model.to(torch.bfloat16).state_dict()
    return {
        "file": file,
        "config": cfg,
        "num_tensors": len(sd),
        "num_params": int(sum(t.numel() for t in sd.values())),
        "tensors": {name: {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
                    for name, t in sorted(sd.items())},
    }


def build_inventory() -> Dict[str, Any]:
    """Tensor names, shapes and dtypes of the real-size checkpoints, from the
    reference classes instantiated on the meta device (no memory is used)."""
    out: Dict[str, Any] = {
        "note": ("Built on the meta device from the reference classes with the config dicts "
                 "given here; names/shapes are what save_pretrained writes (checked on the tiny "
                 "checkpoints: saved keys == state_dict keys). dtype assumes the release is bf16 "
                 "(not verifiable offline)."),
        "models": {},
    }
    for key, cfg in real_configs().items():
        with torch.device("meta"):
            model = instantiate_tts_model(cfg)
        out["models"][key] = _meta_inventory(model, cfg, "model.safetensors")
        del model
    cfg = speech_tokenizer_config(tiny=False)
    with torch.device("meta"):
        model = instantiate_speech_tokenizer(cfg)
    st = _meta_inventory(model, cfg, "speech_tokenizer/model.safetensors")
    for part in ("decoder", "encoder"):
        st[f"num_params_{part}"] = int(sum(int(np.prod(t["shape"])) for n, t in st["tensors"].items()
                                           if n.startswith(part + ".")))
    out["speech_tokenizer"] = st
    return out


# =============================================================================
# Misc checks recorded in the manifest
# =============================================================================
def rope_equivalence(model: Qwen3TTSForConditionalGeneration) -> float:
    """All three M-RoPE position streams are equal for TTS, so the interleaved
    multimodal RoPE must reduce to plain rotate-half RoPE; returns max |diff|."""
    cfg = model.talker.config
    hd = cfg.head_dim
    n = 41
    pos = torch.arange(n).view(1, 1, -1).expand(3, 1, -1)
    x = torch.randn(1, 2, n, hd, generator=torch.Generator().manual_seed(SEED))
    cos, sin = model.talker.model.rotary_emb(x, pos)
    rs = cfg.rope_scaling
    q_ref, _ = apply_multimodal_rotary_pos_emb(x, x, cos, sin, rs["mrope_section"], rs["interleaved"])
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2).float() / hd))
    ang = torch.arange(n).float()[:, None] * inv[None]
    emb = torch.cat([ang, ang], -1)
    q_plain = x * emb.cos() + rotate_half(x) * emb.sin()
    return float((q_ref - q_plain).abs().max())


def package_versions() -> Dict[str, str]:
    import importlib.metadata as md
    out = {"python": platform.python_version()}
    for dist in ("qwen-tts", "transformers", "torch", "tokenizers", "numpy", "safetensors",
                 "huggingface_hub", "librosa", "soundfile", "scipy"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


def array_summary(arrays: Dict[str, np.ndarray]) -> Dict[str, Any]:
    return {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in arrays.items()}


# =============================================================================
# Main
# =============================================================================
class Clock:
    def __init__(self):
        self.t0 = self.last = time.perf_counter()

    def __call__(self, what: str) -> None:
        now = time.perf_counter()
        print(f"[goldens] {what}: {now - self.last:.1f}s (total {now - self.t0:.1f}s)", flush=True)
        self.last = now


def clean_outputs(out: str) -> None:
    """Remove what a previous run wrote (and only that)."""
    shutil.rmtree(os.path.join(out, "checkpoints"), ignore_errors=True)
    for name in os.listdir(out):
        if name.endswith(".npz") or name in ("manifest.json", "tokenizer_cases.json", "inventory_real.json"):
            os.remove(os.path.join(out, name))


def build(out: str) -> None:
    clock = Clock()
    torch.manual_seed(SEED)
    torch.set_num_threads(TORCH_THREADS)
    os.makedirs(out, exist_ok=True)
    clean_outputs(out)

    ck = build_tiny_checkpoints(out)
    clock("tiny checkpoints")

    manifest = new_manifest(ck, out)

    ref_wav = reference_audio()
    token_cases: Dict[str, Any] = {"variants": {}, "case_prompts": {}}
    for variant in VARIANTS:
        w = load_wrapper(ck.dirs[variant])
        w.model.eval()
        manifest["checkpoints"][variant]["speech_tokenizer_attn_implementation"] = \
            w.model.speech_tokenizer.model.config.decoder_config._attn_implementation
        clock(f"load {variant}")
        voice_items = {}
        if variant == "base":
            voice_items, ref_mel = voice_clone_items(w, ref_wav)
            clock("voice-clone prompts")
        for case in [c for c in CASES if c.variant == variant]:
            items = voice_items.get("xvec" if case.x_vector_only_mode else "icl")
            decoder = w.model.speech_tokenizer.model.decoder
            stages = DecoderTrace(decoder) if case.name == DECODER_STAGES_CASE else contextlib.nullcontext()
            with torch.inference_mode(), stages:
                res = run_case(w, case, items)
            arrays = res["arrays"]
            if case.variant == "base":
                it = items[0]
                arrays["ref_wav"] = ref_wav
                arrays["ref_mel"] = f32(ref_mel)                                # [frames, 128]
                arrays["ref_spk_embedding"] = f32(it.ref_spk_embedding)         # [D]
                if it.ref_code is not None:
                    arrays["ref_code"] = i64(it.ref_code)                       # [Tr, 16]
            write_npz(os.path.join(out, f"{case.name}.npz"), arrays)

            manifest["cases"][case.name] = case_manifest(case, variant, arrays, res, manifest, ck)
            token_cases["case_prompts"][case.name] = {
                "input_text": w._build_assistant_text(case.text),
                "input_ids": arrays["input_ids"].tolist(),
                "instruct_text": w._build_instruct_text(case.instruct) if case.instruct else None,
                "instruct_ids": arrays["instruct_ids"].tolist() if "instruct_ids" in arrays else None,
                "ref_text": w._build_ref_text(case.ref_text) if "ref_ids" in arrays else None,
                "ref_ids": arrays["ref_ids"].tolist() if "ref_ids" in arrays else None,
            }
            clock(f"case {case.name} ({arrays['codes'].shape[0]} frames)")

            if case.name == DECODER_STAGES_CASE:
                write_decoder_stages(stages, case, arrays, w, decoder, out, manifest)
                clock("decoder stages + long decode")

        token_cases["variants"][f"tiny-{variant}"] = {
            "tokenizer_dir": manifest["checkpoints"][variant]["dir"],
            **tokenizer_cases(w, ck.dirs[variant]),
        }
        del w
        clock(f"tokenizer cases {variant}")

    summarize_tokenizers(token_cases, ck)
    write_json(os.path.join(out, "tokenizer_cases.json"), token_cases)
    manifest["tokenizer"] = token_cases["summary"] | {"large_vocab_probe": token_cases["large_vocab_probe"]}
    clock("large-vocab regex probe")

    write_json(os.path.join(out, "inventory_real.json"), build_inventory())
    clock("real-size inventory")

    list_files(out, manifest)
    write_json(os.path.join(out, "manifest.json"), manifest)
    clock(f"done -> {out} ({manifest['total_bytes'] / 1e6:.1f} MB in {len(manifest['files']) + 1} files)")


def new_manifest(ck, out: str) -> Dict[str, Any]:
    """The manifest's settings, tokenizer and checkpoints (its cases and files come later)."""
    manifest: Dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "generator": "tests/reference/build_goldens.py",
        "reference_versions": package_versions(),
        "stubbed_modules": STUBBED_MODULES,
        "settings": {
            "seed": SEED, "torch_threads": TORCH_THREADS, "compute_dtype": "float32",
            "checkpoint_dtype": "bfloat16 (values are bf16-representable, so fp32 compute sees the same numbers)",
            "talker_attn_implementation": "eager",
            "generation_kwargs": GOLDEN_GENERATION_KWARGS,
            "cp_logits_frames": CP_LOGIT_FRAMES,
            "loader": "Qwen3TTSModel.from_pretrained(dir, dtype=torch.float32, attn_implementation='eager')",
        },
        "checkpoints": {},
        "text_tokenizer": {
            "bpe_vocab_size": ck.tokenizer_info["bpe_vocab_size"],
            "num_merges": ck.tokenizer_info["num_merges"],
            "special_token_ids": ck.tokenizer_info["special_ids"],
            "assistant_id": ck.tokenizer_info["assistant_id"],
            "user_id": ck.tokenizer_info["user_id"],
            "newline_id": ck.tokenizer_info["newline_id"],
            "text_vocab_size": ck.text_vocab_size,
        },
        "special_ids": {"text": ck.text_special_ids, "codec": CODEC_SPECIAL_IDS,
                        "codec_language": {**LANGUAGE_IDS, **DIALECT_IDS}, "speakers": SPEAKER_IDS,
                        "speaker_dialects": SPEAKER_DIALECTS},
        "text_vocab_size": ck.text_vocab_size,
        "cases": {},
    }
    for variant, d in ck.dirs.items():
        info = {"dir": os.path.relpath(d, out), "tts_model_type": variant, "tts_model_size": TINY_SIZE_TAG,
                "num_tensors": {}}
        for rel in ("model.safetensors", "speech_tokenizer/model.safetensors"):
            with safe_open(os.path.join(d, rel), "pt") as f:
                info["num_tensors"][rel] = len(list(f.keys()))
        manifest["checkpoints"][variant] = info
    return manifest


def case_manifest(case, variant: str, arrays: Dict[str, Any], res: Dict[str, Any], manifest: Dict[str, Any],
                  ck) -> Dict[str, Any]:
    """A case's manifest entry: its settings, what they came to, its lengths and its arrays."""
    trailing = arrays["talker_trailing_text_embeds"].shape[0]
    entry = {
        "variant": variant,
        "checkpoint": manifest["checkpoints"][variant]["dir"],
        "settings": {**{k: v for k, v in dataclasses.asdict(case).items() if k not in ("name", "variant")},
                     "text_feeding": case.text_feeding, **GOLDEN_GENERATION_KWARGS},
        "effective": effective_prompt_settings(case, ck.configs[variant]),
        "frames": int(arrays["codes"].shape[0]),
        "prefill_len": int(arrays["talker_prefill_embeds"].shape[0]),
        "trailing_text_len": int(trailing),
        "stopped_by_eos": bool(arrays["codes"].shape[0] < GOLDEN_GENERATION_KWARGS["max_new_tokens"] - 1),
        "distinct_codebook0_codes": int(len(np.unique(arrays["codes"][:, 0]))),
        "wav_clipped_fraction": float(np.mean(np.abs(arrays["wav"]) >= 1.0)),
        "sample_rate": res["sample_rate"],
        "arrays": array_summary(arrays),
    }
    if "ref_code" in arrays:
        body = len(arrays["input_ids"]) - 8
        ref_body = len(arrays["ref_ids"]) - 5
        t1, t2 = ref_body + body + 1, arrays["ref_code"].shape[0] + 1
        entry["icl_lengths"] = {
            "text_rows_T1": int(t1), "codec_rows_T2": int(t2),
            "ref_cut_samples": int(arrays["wav_with_ref"].shape[0] - arrays["wav"].shape[0])}
    return entry


def voice_clone_items(w, ref_wav) -> tuple[Dict[str, Any], Any]:
    """The Base wrapper's voice-clone prompts (in-context, x-vector only) and the speaker encoder's
    input (one mel for both), checked against the mel computed directly."""
    voice_items = {}
    mels = []   # the speaker encoder's input, as computed by extract_speaker_embedding
    hook = w.model.speaker_encoder.register_forward_pre_hook(
        lambda mod, args: mels.append(args[0].detach().clone()))
    voice_items["icl"] = w.create_voice_clone_prompt(ref_audio=(ref_wav, SAMPLE_RATE), ref_text=REF_TEXT,
                                                     x_vector_only_mode=False)
    voice_items["xvec"] = w.create_voice_clone_prompt(ref_audio=(ref_wav, SAMPLE_RATE), ref_text=None,
                                                      x_vector_only_mode=True)
    hook.remove()
    assert len(mels) == 2 and torch.equal(mels[0], mels[1])
    ref_mel = mels[0][0]                                                  # [frames, 128]
    direct = mel_spectrogram(torch.from_numpy(ref_wav)[None], n_fft=1024, num_mels=128,
                             sampling_rate=SAMPLE_RATE, hop_size=256, win_size=1024, fmin=0,
                             fmax=12000).transpose(1, 2)[0]
    assert torch.equal(ref_mel, direct)
    return voice_items, ref_mel


def write_decoder_stages(stages, case, arrays: Dict[str, Any], w, decoder, out: str, manifest: Dict[str, Any]) -> None:
    """The decoder's stages of the case traced, checked against its waveform and codes, written with
    the RoPE check and the long decode."""
    st = stages.stages
    assert stages.calls == 1, "expected a single decoder pass (<= 300 frames)"
    assert np.array_equal(st["wav"][0, 0][: arrays["wav"].shape[0]], arrays["wav"]), \
        "decoder trace does not match the wrapper's waveform"
    assert np.array_equal(st["codes"][0].T, arrays["codes"])
    write_npz(os.path.join(out, "decoder_stages.npz"), st)
    manifest["decoder_stages"] = {"case": case.name, "arrays": array_summary(st)}
    manifest["rope_check"] = {"max_abs_diff_mrope_vs_plain_rope": rope_equivalence(w.model)}
    long_decode(decoder, out, manifest)


def summarize_tokenizers(token_cases: Dict[str, Any], ck) -> None:
    """The large-vocab probe and why the tiny wrapper keeps the Qwen2 regex, into `token_cases`."""
    token_cases["large_vocab_probe"] = probe_large_vocab_regex(ck.dirs["custom_voice"])
    wrapper_kind = token_cases["variants"]["tiny-custom_voice"]["tokenizers"]["wrapper"]["split_regex_kind"]
    token_cases["summary"] = {
        "wrapper_split_regex_kind_tiny": wrapper_kind,
        "why": ("transformers 4.57.3 only considers the Mistral-regex patch when tokenizer.vocab_size > "
                "100000; the tiny BPE is far smaller, so the wrapper keeps the Qwen2 regex here. For a "
                "local folder with a real-size vocab and transformers_version 4.57.3 in config.json "
                "(see large_vocab_probe) fix_mistral_regex=True swaps in the Mistral regex; "
                "'mistral_patched' ids show that behaviour on the tiny BPE."),
    }

def list_files(out: str, manifest: Dict[str, Any]) -> None:
    """Every file written (but the manifest) with its size and SHA-256, into the manifest."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(out):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, out).replace(os.sep, "/")
            if rel != "manifest.json":
                files[rel] = {"bytes": os.path.getsize(path), "sha256": sha256_file(path)}
    manifest["files"] = files
    manifest["total_bytes"] = int(sum(f["bytes"] for f in files.values()))


def long_decode(decoder: torch.nn.Module, out: str, manifest: Dict[str, Any]) -> None:
    """400 random frames through the reference's chunked_decode (300-frame
    chunks, 25 frames of left context) and through one full pass."""
    g = torch.Generator().manual_seed(SEED + 7)
    codes = torch.randint(0, 2048, (1, 16, LONG_DECODE_FRAMES), generator=g)
    with torch.inference_mode():
        wav_chunked = decoder.chunked_decode(codes)[0, 0]
        wav_full = decoder(codes)[0, 0]
    write_npz(os.path.join(out, "decoder_long.npz"), {
        "codes": i64(codes[0].T),             # [400, 16]
        "wav_chunked": f32(wav_chunked),      # [400 * 1920]
        "wav_full": f32(wav_full),            # [400 * 1920]
    })
    split = 300 * int(decoder.total_upsample)
    diff = (wav_chunked - wav_full).abs()
    manifest["decoder_long"] = {
        "frames": LONG_DECODE_FRAMES, "chunk_size": 300, "left_context": 25,
        "samples_per_frame": int(decoder.total_upsample),
        "max_abs_diff_chunked_vs_full": float(diff.max()),
        "max_abs_diff_first_300_frames": float(diff[:split].max()),
        "max_abs_diff_after_300_frames": float(diff[split:].max()),
    }


def check_env() -> None:
    """For the live test: can the reference be imported here?"""
    print(json.dumps({"ok": True, "versions": package_versions(), "stubbed": STUBBED_MODULES}))


def main(argv: Optional[List[str]] = None) -> None:
    global TORCH_THREADS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="output folder (e.g. tests/golden)")
    ap.add_argument("--check-env", action="store_true", help="only check that the reference imports")
    ap.add_argument("--threads", type=int, default=TORCH_THREADS,
                    help="torch threads (the goldens use 1; measure_spread.py tries others)")
    args = ap.parse_args(argv)
    if args.check_env:
        check_env()
        return
    if not args.out:
        ap.error("--out is required")
    TORCH_THREADS = args.threads
    build(os.path.abspath(args.out))


if __name__ == "__main__":
    main()
