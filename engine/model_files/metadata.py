"""GGUF metadata (hyper-parameters, special ids, speaker and language tables, sampling
defaults) derived from the released config files. Keys live under the `qwen3tts.` prefix;
the native loader reads the same keys (native/src/model/hparams.cpp)."""
from __future__ import annotations

import json
from typing import Any

from kazeia import _native

from .errors import ConversionError

ARCH = _native.ARCHITECTURE
P = ARCH + "."

# Class defaults of the reference's speaker encoder config; released configs carry only
# enc_dim and sample_rate.
SPEAKER_ENCODER_DEFAULTS = {
    "mel_dim": 128, "enc_channels": [512, 512, 512, 512, 1536], "enc_kernel_sizes": [5, 3, 3, 3, 1],
    "enc_dilations": [1, 2, 3, 4, 1], "enc_attention_channels": 128, "enc_res2net_scale": 8,
    "enc_se_channels": 128, "sample_rate": 24000,
}

# generation_config.json keys -> metadata keys, with the wrapper's defaults when a key is absent.
SAMPLING_KEYS = {
    "do_sample": ("sampling.do_sample", True),
    "temperature": ("sampling.temperature", 0.9),
    "top_k": ("sampling.top_k", 50),
    "top_p": ("sampling.top_p", 1.0),
    "repetition_penalty": ("sampling.repetition_penalty", 1.05),
    "subtalker_dosample": ("sampling.subtalker_do_sample", True),
    "subtalker_temperature": ("sampling.subtalker_temperature", 0.9),
    "subtalker_top_k": ("sampling.subtalker_top_k", 50),
    "subtalker_top_p": ("sampling.subtalker_top_p", 1.0),
    "max_new_tokens": ("sampling.max_new_tokens", 8192),
}

CODEC_IDS = {"pad": "codec_pad_id", "bos": "codec_bos_id", "eos": "codec_eos_token_id", "think": "codec_think_id",
             "nothink": "codec_nothink_id", "think_bos": "codec_think_bos_id", "think_eos": "codec_think_eos_id"}
TEXT_IDS = {"im_start": "im_start_token_id", "im_end": "im_end_token_id", "tts_pad": "tts_pad_token_id",
            "tts_bos": "tts_bos_token_id", "tts_eos": "tts_eos_token_id"}


def _get(cfg: dict, key: str, where: str) -> Any:
    if key not in cfg:
        raise ConversionError(f"{where} has no '{key}'")
    return cfg[key]


def _transformer(cfg: dict, where: str, prefix: str, eps_key: str, eps_name: str) -> dict:
    heads = _get(cfg, "num_attention_heads", where)
    return {
        prefix + "hidden_size": _get(cfg, "hidden_size", where),
        prefix + "intermediate_size": _get(cfg, "intermediate_size", where),
        prefix + "num_layers": _get(cfg, "num_hidden_layers", where),
        prefix + "num_heads": heads,
        prefix + "num_kv_heads": cfg.get("num_key_value_heads", heads),
        prefix + "head_dim": cfg.get("head_dim") or _get(cfg, "hidden_size", where) // heads,
        prefix + eps_name: float(_get(cfg, eps_key, where)),
        prefix + "rope_theta": float(_get(cfg, "rope_theta", where)),
    }


def _speaker_id(value: Any, name: str) -> int:
    if isinstance(value, list):
        if len(value) != 1:
            raise ConversionError(f"config.json: speaker {name} has {len(value)} ids, expected one")
        value = value[0]
    return int(value)


def metadata_from_configs(config: dict, generation_config: dict, speech_tokenizer_config: dict) -> dict[str, Any]:
    """Every metadata value a model file carries except the tokenizer and provenance."""
    talker = _get(config, "talker_config", "config.json")
    cp = _get(talker, "code_predictor_config", "config.json talker_config")
    variant = _get(config, "tts_model_type", "config.json")
    if variant not in ("custom_voice", "voice_design", "base"):
        raise ConversionError(f"config.json: unknown tts_model_type {variant!r}")
    md: dict[str, Any] = {
        "general.architecture": ARCH,
        P + "format_version": _native.FORMAT_VERSION,
        P + "variant": variant,
        P + "size": str(config.get("tts_model_size", "unknown")),
    }
    md.update(_transformer(talker, "talker_config", P + "talker.", "rms_norm_eps", "rms_norm_eps"))
    md.update({
        P + "talker.codec_vocab_size": _get(talker, "vocab_size", "talker_config"),
        P + "talker.text_vocab_size": _get(talker, "text_vocab_size", "talker_config"),
        P + "talker.text_hidden_size": _get(talker, "text_hidden_size", "talker_config"),
        P + "talker.num_code_groups": _get(talker, "num_code_groups", "talker_config"),
        P + "talker.max_position_embeddings": _get(talker, "max_position_embeddings", "talker_config"),
    })
    md.update(_transformer(cp, "code_predictor_config", P + "code_predictor.", "rms_norm_eps", "rms_norm_eps"))
    md[P + "code_predictor.vocab_size"] = _get(cp, "vocab_size", "code_predictor_config")

    dec = _get(speech_tokenizer_config, "decoder_config", "speech_tokenizer/config.json")
    where = "speech_tokenizer decoder_config"
    md.update(_transformer(dec, where, P + "decoder.", "rms_norm_eps", "rms_norm_eps"))
    for key in ("codebook_size", "codebook_dim", "num_quantizers", "num_semantic_quantizers", "latent_dim",
                "sliding_window", "decoder_dim", "upsample_rates", "upsampling_ratios"):
        md[P + "decoder." + key] = _get(dec, key, where)
    md[P + "decoder.sample_rate"] = speech_tokenizer_config.get("output_sample_rate", 24000)

    if variant == "base":
        enc = _get(speech_tokenizer_config, "encoder_config", "speech_tokenizer/config.json")
        where = "speech_tokenizer encoder_config"
        md.update(_transformer(enc, where, P + "audio_encoder.", "norm_eps", "norm_eps"))
        for key in ("num_filters", "upsampling_ratios", "kernel_size", "residual_kernel_size", "last_kernel_size",
                    "num_residual_layers", "dilation_growth_rate", "compress", "sliding_window", "codebook_size",
                    "codebook_dim", "num_semantic_quantizers"):
            md[P + "audio_encoder." + key] = _get(enc, key, where)
        md[P + "audio_encoder.num_quantizers"] = speech_tokenizer_config.get(
            "encoder_valid_num_quantizers", _get(enc, "num_quantizers", where))
        md[P + "audio_encoder.sample_rate"] = speech_tokenizer_config.get("input_sample_rate", 24000)
        if enc.get("vector_quantization_hidden_dimension", enc["codebook_dim"]) != enc["codebook_dim"]:
            raise ConversionError(f"{where}: vector_quantization_hidden_dimension differs from codebook_dim")
        spk = {**SPEAKER_ENCODER_DEFAULTS, **config.get("speaker_encoder_config", {})}
        md.update({
            P + "speaker_encoder.enc_dim": _get(spk, "enc_dim", "speaker_encoder_config"),
            P + "speaker_encoder.mel_dim": spk["mel_dim"],
            P + "speaker_encoder.sample_rate": spk["sample_rate"],
            P + "speaker_encoder.channels": list(spk["enc_channels"]),
            P + "speaker_encoder.kernel_sizes": list(spk["enc_kernel_sizes"]),
            P + "speaker_encoder.dilations": list(spk["enc_dilations"]),
            P + "speaker_encoder.attention_channels": spk["enc_attention_channels"],
            P + "speaker_encoder.res2net_scale": spk["enc_res2net_scale"],
            P + "speaker_encoder.se_channels": spk["enc_se_channels"],
        })

    for name, key in TEXT_IDS.items():
        md[P + "token." + name] = _get(config, key, "config.json")
    for name, key in CODEC_IDS.items():
        md[P + "codec." + name] = _get(talker, key, "talker_config")

    langs = talker.get("codec_language_id") or {}
    md[P + "languages.names"] = [k.lower() for k in langs]
    md[P + "languages.ids"] = [int(v) for v in langs.values()]
    speakers = talker.get("spk_id") or {}
    dialects = talker.get("spk_is_dialect") or {}
    md[P + "speakers.names"] = [k.lower() for k in speakers]
    md[P + "speakers.ids"] = [_speaker_id(v, k) for k, v in speakers.items()]
    md[P + "speakers.dialects"] = [(dialects.get(k) or "") if isinstance(dialects.get(k), str) else ""
                                   for k in speakers]
    for src, (key, default) in SAMPLING_KEYS.items():
        value = generation_config.get(src, default)
        md[P + key] = type(default)(value)

    md[P + "source.config"] = json.dumps(config, sort_keys=True)
    md[P + "source.speech_tokenizer_config"] = json.dumps(speech_tokenizer_config, sort_keys=True)
    md[P + "source.generation_config"] = json.dumps(generation_config, sort_keys=True)
    return md
