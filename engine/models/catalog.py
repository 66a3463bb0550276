"""The released Qwen3-TTS 12 Hz checkpoints by short alias: their repositories, what each can do,
about how much each downloads and how large its converted file is, and the type it converts to."""
from __future__ import annotations

from dataclasses import dataclass

CODEC_REPO = "Qwen/Qwen3-TTS-Tokenizer-12Hz"

# Gate-passing mixes (README "Which weight type"); other sizes (the tiny test checkpoints) get q8_0.
DEFAULT_TYPES = {"0.6B": "talker=q6_k,code_predictor=q5_k", "1.7B": "talker=q5_k,code_predictor=q6_k"}
FALLBACK_TYPE = "q8_0"
DEFAULT_DECODER_TYPE = "f16"


@dataclass(frozen=True)
class KnownModel:
    alias: str
    repo: str
    size: str | None            # "0.6B" / "1.7B"; None for the codec
    variant: str | None         # custom_voice / voice_design / base; None for the codec
    abilities: str
    download_mb: int            # about, bf16 weights and the text tokenizer files
    converted_mb: int | None    # about, at the default type (None: not converted)

    @property
    def codec(self) -> bool:
        return self.variant is None


# Sizes from the parameter counts of the release (tests/golden/inventory_real.json, all bf16): the
# checkpoint plus its speech_tokenizer/ (170.6 M: decoder 114.3 M, Mimi encoder 56.2 M) at 2 bytes,
# about 5 MB of tokenizer files; converted: each tensor at its planned type, about 7 MB of metadata.
# tests/models/test_pull.py recomputes them.
KNOWN_MODELS = (
    KnownModel("0.6b-customvoice", "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", "0.6B", "custom_voice",
               "9 built-in speakers", 2158, 977),
    KnownModel("0.6b-base", "Qwen/Qwen3-TTS-12Hz-0.6B-Base", "0.6B", "base",
               "voice cloning from reference audio (kazeia voice create)", 2175, 1126),
    KnownModel("1.7b-customvoice", "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "1.7B", "custom_voice",
               "9 built-in speakers, styled by instructions (--instruct)", 4179, 1594),
    KnownModel("1.7b-voicedesign", "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign", "1.7B", "voice_design",
               "a voice described in words (--instruct)", 4179, 1594),
    KnownModel("1.7b-base", "Qwen/Qwen3-TTS-12Hz-1.7B-Base", "1.7B", "base",
               "voice cloning from reference audio (kazeia voice create)", 4203, 1755),
    KnownModel("tokenizer-12hz", CODEC_REPO, None, None,
               "the shared speech codec alone: download only, never converted (every model above "
               "carries its own copy in speech_tokenizer/)", 341, None),
)


def find_known(source: str) -> KnownModel | None:
    """The known model for an alias or a repository id (either case), or None."""
    key = source.strip().lower()
    for model in KNOWN_MODELS:
        if key in (model.alias, model.repo.lower(), model.repo.lower().split("/", 1)[1]):
            return model
    return None


def repo_for(source: str) -> str:
    """The repository id an argument of `kazeia pull` names: an alias, or OWNER/NAME as given."""
    known = find_known(source)
    if known is not None:
        return known.repo
    if source.count("/") == 1 and all(source.split("/")):
        return source
    aliases = ", ".join(m.alias for m in KNOWN_MODELS)
    raise ValueError(f"{source!r} is neither a known alias ({aliases}) nor a repository id OWNER/NAME")


def size_label(config: dict) -> str | None:
    """"0.6B" or "1.7B" from a checkpoint's talker width (tts_model_size is not reliable: the
    reference's tiny test checkpoints say 1b7), None for other sizes."""
    hidden = (config.get("talker_config") or {}).get("hidden_size")
    return {1024: "0.6B", 2048: "1.7B"}.get(hidden)


def default_type(size: str | None) -> str:
    return DEFAULT_TYPES.get(size or "", FALLBACK_TYPE)
