"""`kazeia make-random-model`: deterministic random weights in the real layout, without torch.

The files go through the same metadata builder and tensor table as converted checkpoints, so a
random model differs from a real one only in its values: the bundled demo model (tiny, a few MB)
and full-size 0.6B / 1.7B files that cost exactly as much per frame as the released models.
"""
from __future__ import annotations

import json
import math
import os
import zlib
from pathlib import Path

import numpy as np
from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

from kazeia.resources import resource_path

from .convert import expected_tensors
from .errors import ConversionError
from .gguf_file import TensorPlan, TypeMix, plan_type, write_model_file
from .metadata import P, metadata_from_configs
from .text_tokenizer import build_tokenizer, QWEN2_SPLIT

SIZES = ("tiny", "small", "0.6b", "1.7b")
# "small": tiny everywhere but talker and code predictor 256 wide, so their rows are whole q6_K blocks
# and several q8_0 blocks (the kernels' four-accumulator paths run, as at full size)
_TINY_LIKE = ("tiny", "small")
VARIANTS = ("custom_voice", "voice_design", "base")
RANDOM_LABEL = "random weights, produces noise"

LANGUAGES = {"chinese": 2055, "english": 2050, "german": 2053, "italian": 2070, "portuguese": 2071,
             "spanish": 2054, "japanese": 2058, "korean": 2064, "french": 2061, "russian": 2069}
DIALECTS = {"beijing_dialect": 2074, "sichuan_dialect": 2062}
SPEAKERS = {"serena": 3066, "vivian": 3065, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861, "ono_anna": 2873,
            "sohee": 2864, "eric": 2875, "dylan": 2878}
SPEAKER_DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}
CODEC_IDS = dict(codec_pad_id=2148, codec_bos_id=2149, codec_eos_token_id=2150, codec_think_id=2154,
                 codec_nothink_id=2155, codec_think_bos_id=2156, codec_think_eos_id=2157)
GENERATION_CONFIG = {"do_sample": True, "repetition_penalty": 1.05, "temperature": 0.9, "top_p": 1.0, "top_k": 50,
                     "subtalker_dosample": True, "subtalker_temperature": 0.9, "subtalker_top_p": 1.0,
                     "subtalker_top_k": 50, "max_new_tokens": 8192}
REAL_TEXT_VOCAB = 151936
REAL_FIRST_SPECIAL = 151643   # <|endoftext|> in the released vocabulary
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TTS_SPECIALS = ["<tts_pad>", "<tts_text_bos>", "<tts_text_eod>", "<tts_text_bos_single>"]
REAL_TTS_PAD = 151671

# (talker hidden, intermediate, layers, heads, kv heads, head_dim, text hidden) per size
_TALKER = {"tiny": (64, 128, 2, 4, 2, 16, 48), "small": (256, 768, 2, 4, 2, 64, 256), "0.6b": (1024, 3072, 28, 16, 8, 128, 2048),
           "1.7b": (2048, 6144, 28, 16, 8, 128, 2048)}
_CODE_PREDICTOR = {"tiny": (32, 64, 2, 4, 2, 8), "small": (256, 768, 2, 4, 2, 64), "0.6b": (1024, 3072, 5, 16, 8, 128),
                   "1.7b": (1024, 3072, 5, 16, 8, 128)}


def _transformer(hidden, inter, layers, heads, kv, head_dim, eps_key="rms_norm_eps", eps=1e-6, theta=1e6):
    return dict(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=heads,
                num_key_value_heads=kv, head_dim=head_dim, **{eps_key: eps}, rope_theta=theta)


def speech_tokenizer_config(size: str) -> dict:
    tiny = size in _TINY_LIKE
    dec = dict(_transformer(*((32, 64, 2, 4, 4, 16) if tiny else (512, 1024, 8, 16, 16, 64)), eps=1e-5, theta=1e4),
               codebook_size=2048, codebook_dim=16 if tiny else 512, num_quantizers=16, num_semantic_quantizers=1,
               latent_dim=48 if tiny else 1024, sliding_window=72, decoder_dim=64 if tiny else 1536,
               upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], layer_scale_initial_scale=0.01,
               max_position_embeddings=8000, hidden_act="silu", attention_bias=False)
    enc = dict(_transformer(*((32, 64, 2, 4, 4, 8) if tiny else (512, 2048, 8, 8, 8, 64)), eps_key="norm_eps",
                            eps=1e-5, theta=1e4),
               num_filters=4 if tiny else 64, upsampling_ratios=[8, 6, 5, 4], kernel_size=7, residual_kernel_size=3,
               last_kernel_size=3, num_residual_layers=1, dilation_growth_rate=2, compress=2,
               sliding_window=250, codebook_size=2048, codebook_dim=16 if tiny else 256,
               vector_quantization_hidden_dimension=16 if tiny else 256, num_quantizers=32,
               num_semantic_quantizers=1, sampling_rate=24000, frame_rate=12.5, use_causal_conv=True)
    return dict(model_type="qwen3_tts_tokenizer_12hz", encoder_valid_num_quantizers=16, input_sample_rate=24000,
                output_sample_rate=24000, decode_upsample_rate=1920, encode_downsample_rate=1920,
                encoder_config=enc, decoder_config=dec)


def model_config(size: str, variant: str, text_vocab: int, special_ids: dict[str, int]) -> dict:
    """A config.json as released (hand-shaped, only the keys the reference reads)."""
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; choose one of {', '.join(SIZES)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    h, inter, layers, heads, kv, hd, text_hidden = _TALKER[size]
    # multimodal RoPE sections (all three streams are equal in TTS: plain RoPE, but the reference reads them)
    mrope = [hd // 2 - 2 * (hd // 2 * 5 // 16), hd // 2 * 5 // 16, hd // 2 * 5 // 16]
    talker = dict(_transformer(h, inter, layers, heads, kv, hd), vocab_size=3072, text_vocab_size=text_vocab,
                  rope_scaling={"rope_type": "default", "interleaved": True, "mrope_section": mrope},
                  text_hidden_size=text_hidden, num_code_groups=16, max_position_embeddings=32768,
                  code_predictor_config=dict(_transformer(*_CODE_PREDICTOR[size]), vocab_size=2048,
                                             num_code_groups=16, max_position_embeddings=65536),
                  **CODEC_IDS)
    langs = dict(LANGUAGES)
    if variant == "custom_voice":
        langs.update(DIALECTS)
        talker["spk_id"] = dict(SPEAKERS)
        talker["spk_is_dialect"] = {k: SPEAKER_DIALECTS.get(k, False) for k in SPEAKERS}
    else:
        talker["spk_id"], talker["spk_is_dialect"] = {}, {}
    talker["codec_language_id"] = langs
    cfg = dict(model_type="qwen3_tts", tokenizer_type="qwen3_tts_tokenizer_12hz",
               tts_model_size={"tiny": "tiny", "small": "tiny", "0.6b": "0b6", "1.7b": "1b7"}[size], tts_model_type=variant,
               talker_config=talker, **special_ids)
    if variant == "base":
        spk = dict(enc_dim=h, sample_rate=24000)
        if size in _TINY_LIKE:
            spk.update(enc_channels=[32, 32, 32, 32, 96], enc_attention_channels=16, enc_res2net_scale=4,
                       enc_se_channels=16)
        cfg["speaker_encoder_config"] = spk
    return cfg


def demo_tokenizer(text_vocab: int | None) -> tuple[Tokenizer, dict[str, int], int]:
    """A small byte-level BPE trained (deterministically) on a bundled corpus, with the Qwen special
    tokens; at full size the specials sit at their released ids. Returns (tokenizer, ids, vocab size)."""
    corpus = resource_path("demo_corpus.txt").read_text(encoding="utf-8")
    lines = ["assistant\n", "user\n"] * 40 + corpus.splitlines() * 4
    trainer_tok = Tokenizer(models.BPE())
    trainer_tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=640, show_progress=False, special_tokens=[],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    trainer_tok.train_from_iterator(lines, trainer)
    vocab = trainer_tok.get_vocab()
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
              for m in json.loads(trainer_tok.to_str())["model"]["merges"]]
    n = len(vocab)
    if text_vocab is None:   # tiny: specials right after the vocabulary
        names = SPECIALS + TTS_SPECIALS
        added = [(n + i, s, True) for i, s in enumerate(names)]
        size = int(math.ceil((n + len(names)) / 64) * 64)
    else:                    # full size: pad the vocabulary so the specials get their released ids
        for i in range(n, REAL_FIRST_SPECIAL):
            vocab[f"<unused_{i}>"] = i
        names = SPECIALS + [f"<|reserved_{i}|>" for i in range(REAL_FIRST_SPECIAL + 3, REAL_TTS_PAD)] + TTS_SPECIALS
        added = [(REAL_FIRST_SPECIAL + i, s, True) for i, s in enumerate(names)]
        size = text_vocab
    tok = build_tokenizer(vocab, merges, added)
    ids = {s: tok.token_to_id(s) for s in SPECIALS + TTS_SPECIALS}
    prefix = tok.encode("<|im_start|>assistant\n", add_special_tokens=False).ids
    if len(prefix) != 3:
        raise ConversionError(f"demo tokenizer splits the role prefix into {len(prefix)} tokens, expected 3")
    return tok, ids, size


# the speech decoder's last layer: the vocoder's final causal conv (96 -> 1, k=7 at full size), whose
# output is clamped to [-1, 1] to give the waveform
OUTPUT_LAYER = ("dec.voc.conv_out.weight", "dec.voc.conv_out.bias")


def _random_values(name: str, shape: list[int], transform: str, seed: int,
                   output_gain: float = 1.0) -> np.ndarray:
    """Well-scaled values chosen by a tensor's role; each tensor has its own stream, so values do
    not depend on the order tensors are written in. `output_gain` scales the waveform's final
    layer (weight and bias), so the speech decoder's output before its clamp scales by it."""
    values = _role_values(name, shape, transform, seed)
    if output_gain != 1.0 and name in OUTPUT_LAYER:
        values = values * np.float32(output_gain)
    return values


def _role_values(name: str, shape: list[int], transform: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    r = rng.standard_normal(shape, dtype=np.float32)
    leaf = name.rsplit(".", 1)[-1]
    if transform == "codebook":
        return r
    if leaf == "bias":
        return 0.05 * r
    if name.endswith("norm.weight"):
        return 1.0 + 0.1 * r
    if leaf in ("alpha", "beta"):
        return 0.3 * r
    if leaf in ("attn_scale", "ffn_scale", "gamma"):
        return 0.2 + 0.05 * r
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    scale = 1.0 / math.sqrt(max(fan_in, 1))
    if name == "dec.voc.conv_out.weight":
        scale *= 0.02   # keep the vocoder's output mostly inside its [-1, 1] clamp
    return r * np.float32(scale)


def make_random_model(out_path: str | os.PathLike, size: str = "tiny", variant: str = "custom_voice",
                      seed: int = 0, out_type: str | TypeMix | None = None, progress: bool = True,
                      decoder_type: str | None = None, output_gain: float = 1.0) -> Path:
    """Write a random model. `output_gain` scales the speech decoder's final layer (1.0: the plain
    recipe, used by the bench and test models; the demo recipe lowers it to a sane audio level)."""
    output_gain = float(output_gain)
    if not math.isfinite(output_gain) or output_gain <= 0:
        raise ValueError(f"output_gain must be a positive number, got {output_gain!r}")
    mix = out_type if isinstance(out_type, TypeMix) else TypeMix.parse(out_type or "q8_0", fallback="q8_0")
    tok, ids, text_vocab = demo_tokenizer(None if size in _TINY_LIKE else REAL_TEXT_VOCAB)
    special = dict(im_start_token_id=ids["<|im_start|>"], im_end_token_id=ids["<|im_end|>"],
                   tts_pad_token_id=ids["<tts_pad>"], tts_bos_token_id=ids["<tts_text_bos>"],
                   tts_eos_token_id=ids["<tts_text_eod>"])
    cfg = model_config(size, variant, text_vocab, special)
    md = metadata_from_configs(cfg, GENERATION_CONFIG, speech_tokenizer_config(size))
    specs = expected_tensors(md)
    md["general.name"] = f"kazeia-random-{size}-{variant}-seed{seed}"
    md["general.description"] = f"Qwen3-TTS {variant} {size}: {RANDOM_LABEL}"
    md[P + "random_weights"] = True
    md[P + "random_seed"] = int(seed)
    if output_gain != 1.0:   # recorded only when used, so plain-recipe files stay as they were
        md[P + "random_output_gain"] = output_gain
    md[P + "file_type"] = str(mix)
    md[P + "tokenizer.split"] = "qwen2"
    md["tokenizer.huggingface.json"] = tok.to_str()
    md[P + "source.tensors"] = []
    md[P + "source.ignored"] = []
    plans = [TensorPlan(s["name"], list(s["shape"]), plan_type(s, mix, decoder_type),
                        (lambda s=s: _random_values(s["name"], list(s["shape"]), s["transform"], seed,
                                                     output_gain)))
             for s in specs]
    write_model_file(out_path, md, plans, progress=progress, label=f"random {size} {variant}")
    return Path(out_path)
