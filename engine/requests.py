"""What a synthesis is asked and what it gives back: sampling parameters, a request, the result,
its per-stage timings and the chunks a stream hands on. Plain data, shared by the engine, the batch
worker, scripts, the command line and the workbench."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .model_file import ModelInfo
from .prompt import Voice


@dataclass
class SamplingParams:
    """Token choice for the talker (code 0 of each frame) and the code predictor (codes 1..15).
    `from_model` takes the defaults stored in the model file."""
    do_sample: bool = True
    temperature: float = 0.9
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.05
    cp_do_sample: bool = True
    cp_temperature: float = 0.9
    cp_top_k: int = 50
    cp_top_p: float = 1.0
    seed: int = 0
    max_frames: int | None = None   # None: derived from the text length (runaway guard)

    @classmethod
    def from_model(cls, info: ModelInfo, **overrides) -> "SamplingParams":
        d = info.sampling_defaults
        base = cls(do_sample=d.get("do_sample", True), temperature=d.get("temperature", 0.9), top_k=d.get("top_k", 50),
                   top_p=d.get("top_p", 1.0), repetition_penalty=d.get("repetition_penalty", 1.05),
                   cp_do_sample=d.get("subtalker_do_sample", True), cp_temperature=d.get("subtalker_temperature", 0.9),
                   cp_top_k=d.get("subtalker_top_k", 50), cp_top_p=d.get("subtalker_top_p", 1.0))
        return replace(base, **overrides)

    def greedy(self) -> "SamplingParams":
        return replace(self, do_sample=False, cp_do_sample=False)

    def validate(self) -> None:
        for name in ("temperature", "cp_temperature"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        for name in ("top_p", "cp_top_p"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1]")
        for name in ("top_k", "cp_top_k"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 (0 = off)")
        if self.repetition_penalty <= 0:
            raise ValueError("repetition_penalty must be positive")
        if self.max_frames is not None and self.max_frames < 1:
            raise ValueError("max_frames must be at least 1")
        if not 0 <= self.seed < 2 ** 64:
            raise ValueError("seed must be in [0, 2**64)")


@dataclass
class Timings:
    """Per-stage timings of one synthesis; CLI, bench and GUI all print from this."""
    tokenize_ms: float = 0.0
    prefill_ms: float = 0.0
    talker_ms: list[float] = field(default_factory=list)           # per frame
    code_predictor_ms: list[float] = field(default_factory=list)   # per frame
    decoder_ms: list[float] = field(default_factory=list)          # per frame (streaming) or spread evenly
    ttfa_ms: float = 0.0        # call start -> first audio available
    total_ms: float = 0.0
    frames: int = 0
    frame_seconds: float = 0.08

    @property
    def audio_seconds(self) -> float:
        return self.frames * self.frame_seconds

    @property
    def rtf(self) -> float:
        """compute time / audio time (below 1: faster than real time)"""
        return (self.total_ms / 1000) / self.audio_seconds if self.frames else float("nan")

    def mean_ms(self, stage: str) -> float:
        values = getattr(self, f"{stage}_ms")
        return float(np.mean(values)) if values else 0.0

    def summary(self) -> str:
        return (f"tokenize {self.tokenize_ms:.1f} ms, prefill {self.prefill_ms:.1f} ms; per frame: talker "
                f"{self.mean_ms('talker'):.1f} ms, code predictor {self.mean_ms('code_predictor'):.1f} ms, decoder "
                f"{self.mean_ms('decoder'):.1f} ms; {self.frames} frames ({self.audio_seconds:.2f} s), TTFA "
                f"{self.ttfa_ms:.0f} ms, RTF {self.rtf:.2f}")


@dataclass
class Result:
    audio: np.ndarray          # float32, mono
    sample_rate: int
    codes: np.ndarray          # [frames, 16]
    timings: Timings
    stop_reason: str           # eos | limit | cancelled
    placement_report: list = field(default_factory=list)   # where each launch ran (Engine.placement_report)


@dataclass
class Request:
    """One utterance for Engine.synthesize_many (the arguments of synthesize)."""
    text: str
    speaker: str | None = None
    language: str | None = "auto"
    instruct: str | None = None
    voice: Voice | None = None
    sampling: SamplingParams | None = None
    streaming_text: bool | None = None


@dataclass
class Chunk:
    audio: np.ndarray          # the samples of `frames` new frames
    first_frame: int
    frames: int
    timings: Timings           # running totals so far
