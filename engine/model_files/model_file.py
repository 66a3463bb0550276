"""Opening a model file: what it is (variant, sizes, speakers, languages) for CLI, GUI and engine."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from kazeia import _native

from .metadata import P
from .text_tokenizer import TextTokenizer


@dataclass(frozen=True)
class Speaker:
    name: str
    codec_id: int
    dialect: str | None


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    name: str
    description: str
    variant: str                  # custom_voice | voice_design | base
    size: str                     # 0b6 | 1b7 | tiny | ...
    file_type: str                # as requested at conversion: "q8_0", or a mix "talker=q5_k,code_predictor=q6_k"
    random_weights: bool
    speakers: tuple[Speaker, ...]
    languages: tuple[str, ...]    # user-facing, without "auto" and without dialects
    dialects: tuple[str, ...]
    language_ids: dict[str, int]
    sample_rate: int
    frame_rate: float
    hparams: dict
    stages: dict                  # per stage: n_tensors, n_params, n_bytes, tensors_by_type
    file_size: int
    sampling_defaults: dict = field(default_factory=dict)

    @property
    def n_params(self) -> int:
        return sum(s["n_params"] for s in self.stages.values())

    @property
    def size_label(self) -> str:
        """The size for people: `size` is what the checkpoint's config says (it decides behaviour, as in
        the reference), but test checkpoints keep a released config over tiny dimensions."""
        if self.size != "tiny" and self.n_params < 100e6:
            return f"tiny ({self.size} config)"
        return {"0b6": "0.6B", "1b7": "1.7B"}.get(self.size, self.size)

    def stage_type(self, stage: str) -> str:
        """The type most of a stage's matrices are stored in (what runs, whatever was asked for)."""
        types = self.stages.get(stage, {}).get("tensors_by_type", {})
        big = {t: n for t, n in types.items() if t != "f32"}
        return max(big, key=big.get) if big else "f32"

    def summary(self) -> str:
        lines = [f"{self.path.name}: Qwen3-TTS {self.variant}, size {self.size_label}, {self.file_type}, "
                 f"{self.n_params / 1e6:.1f} M parameters, {self.file_size / 2**20:.1f} MiB"]
        if self.random_weights:
            lines.append("  RANDOM WEIGHTS: produces noise, for demos, tests and benchmarks only")
        lines.append("  speakers: " + (", ".join(s.name for s in self.speakers) or "(none)"))
        lines.append("  languages: auto, " + ", ".join(self.languages))
        order = ["talker", "code_predictor", "decoder", "speaker_encoder", "audio_encoder"]
        for stage, s in sorted(self.stages.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99):
            types = ", ".join(f"{n} {t}" for t, n in sorted(s["tensors_by_type"].items()))
            lines.append(f"  {stage}: {s['n_tensors']} tensors, {s['n_params'] / 1e6:.1f} M params ({types})")
        return "\n".join(lines)


class ModelFile:
    """A loaded model file (weights memory-mapped by the native core)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.native = _native.Model.load(os.fspath(self.path))
        raw = self.native.info()
        m = self.native
        hp = raw["hparams"]
        languages = dict(raw["languages"])
        self.info = ModelInfo(
            path=self.path, name=raw["name"], description=raw["description"], variant=hp["variant"],
            size=hp["size"], file_type=m.get_string(P + "file_type") if m.has_key(P + "file_type") else "?",
            random_weights=raw["random_weights"],
            speakers=tuple(Speaker(n, i, d or None) for n, i, d in raw["speakers"]),
            languages=tuple(n for n in languages if "dialect" not in n),
            dialects=tuple(n for n in languages if "dialect" in n),
            language_ids=languages, sample_rate=hp["decoder"]["sample_rate"],
            frame_rate=hp["decoder"]["sample_rate"] / hp["decoder"]["samples_per_frame"], hparams=hp,
            stages=raw["stages"], file_size=raw["file_size"],
            sampling_defaults={k[len(P + "sampling."):]: self._value(k) for k in m.keys()
                               if k.startswith(P + "sampling.")},
        )

    def _value(self, key: str):
        for getter in (self.native.get_bool, self.native.get_int, self.native.get_float, self.native.get_string):
            try:
                return getter(key)
            except _native.ModelLoadError:
                continue
        raise _native.ModelLoadError(f"{self.path}: metadata key {key} is not a number, flag or string")

    def text_tokenizer(self, split: str = "qwen2") -> TextTokenizer:
        key = "tokenizer.huggingface.json"
        text = self.native.get_string(key)
        try:
            return TextTokenizer(text, split=split)
        except ValueError:
            raise
        except Exception as e:   # the tokenizers library raises plain Exception for damaged JSON
            raise _native.ModelLoadError(f"{self.path}: metadata key {key} is not a valid tokenizer "
                                         f"(damaged file?): {e}") from None

    def special_text_ids(self) -> dict[str, int]:
        return {k[len(P + "token."):]: self.native.get_int(k) for k in self.native.keys() if k.startswith(P + "token.")}

    def codec_ids(self) -> dict[str, int]:
        return {k[len(P + "codec."):]: self.native.get_int(k) for k in self.native.keys() if k.startswith(P + "codec.")}

    def source_tensors(self) -> list[str]:
        key = P + "source.tensors"
        return self.native.get_string_array(key) if self.native.has_key(key) else []


def open_model(path: str | os.PathLike) -> ModelFile:
    return ModelFile(path)
