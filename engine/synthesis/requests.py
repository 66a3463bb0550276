"""What a take is asked and what it gives back: sampling parameters, the request (everything that
decides a take's audio), the result, its per-stage timings and the chunks a stream hands on. Plain
data, shared by the engine, the batch worker, scripts, books, the command line, the server and the
workbench."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..model_files.model_file import ModelInfo
from .prompt import Voice
from ..untrusted import InputError

if TYPE_CHECKING:
    from ..text.compose import Composition, Pauses
    from ..text.join import JoinSettings
    from ..text.sentences import Budget

# The ranges a request's sampling may take (docs/security.md): wider than any use (a temperature over
# 2 is already noise; the talker's vocabulary is 3072 codes), narrow enough that no value reaches the
# native sampler as NaN, an overflow or a runaway take.
MAX_TEMPERATURE = 10.0
MAX_TOP_K = 65_536
MAX_REPETITION_PENALTY = 10.0
MAX_FRAMES = 65_536              # frames of one prompt (87 min at 12.5 Hz; every model's own limit is lower)
MAX_BATCH = 256                 # chunks synthesized together (a batch holds a decoder state per chunk)
MAX_HOLD_MS = 10_000            # the longest a live take may wait for its reading before it speaks
MAX_TEXT_TOKENS = 2048          # one prompt: several minutes of speech; longer texts go in chunks
FRAMES_PER_TOKEN = 16           # slow, emotional speech stays far below this (normal speech: ~4)
HEADROOM_FRAMES = 100           # 8 s on top, for short texts

# How a request is planned (Request.plan): by the one rule for every front end (long_text.one_prompt_text),
# or its text exactly as written in one prompt (no markup, no splitting: the reference's unit, for benches
# and the reference checks). A text.compose.Composition there is a plan the caller has already made.
AUTO = "auto"
ONE_PROMPT = "one prompt"


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
        """InputError (a ValueError) naming the field, for a value the sampler cannot use: every number
        finite and in its range (NaN fails every range; a temperature of NaN once kept no token)."""
        for name in ("do_sample", "cp_do_sample"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise InputError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("temperature", "cp_temperature"):
            value = getattr(self, name)
            if _number(value) is None or not 0 < value <= MAX_TEMPERATURE:
                raise InputError(f"{name} must be positive and finite, at most {MAX_TEMPERATURE:g}, got {value!r}")
        for name in ("top_p", "cp_top_p"):
            value = getattr(self, name)
            if _number(value) is None or not 0 < value <= 1:
                raise InputError(f"{name} must be in (0, 1], got {value!r}")
        for name in ("top_k", "cp_top_k"):
            value = getattr(self, name)
            if _whole(value) is None or not 0 <= value <= MAX_TOP_K:
                raise InputError(f"{name} must be a whole number from 0 (off) to {MAX_TOP_K}, got {value!r}")
        value = self.repetition_penalty
        if _number(value) is None or not 0 < value <= MAX_REPETITION_PENALTY:
            raise InputError(f"repetition_penalty must be positive and finite, at most {MAX_REPETITION_PENALTY:g}, "
                             f"got {value!r}")
        if self.max_frames is not None and (_whole(self.max_frames) is None or not 1 <= self.max_frames <= MAX_FRAMES):
            raise InputError(f"max_frames must be a whole number from 1 to {MAX_FRAMES}, got {self.max_frames!r}")
        if _whole(self.seed) is None or not 0 <= self.seed < 2 ** 64:
            raise InputError(f"seed must be a whole number in [0, 2**64), got {self.seed!r}")


def _number(value) -> float | None:
    """`value` when it is a finite real number (not a bool), else None."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    return value if math.isfinite(value) else None


def _whole(value) -> int | None:
    """`value` when it is a whole number (an int, or a float without a fraction), else None."""
    if _number(value) is None or (isinstance(value, (float, np.floating)) and not float(value).is_integer()):
        return None
    return value


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
    """Everything that decides a take's audio: what every front end builds, and all Engine.plan,
    Engine.take and Engine.open_take read. `sampling` None: the model's defaults (its seed is the
    first chunk's; text.compose.chunk_seed derives the others'). `lexicon`: text.lexicon.Lexicon;
    `join`: text.join.JoinSettings; `chunk_seeds`: chunk index -> seed, chunks made again while the
    others keep theirs (indices the plan lacks are left out: a text edited since); `cast`: names ->
    text.compose.Cast beyond the model's speakers; `budget`, `pauses`: text.sentences.Budget,
    text.compose.Pauses (None: their defaults); `hold_ms`: a live take speaks once its text holds that
    much reading (one token a frame) or ends; `plan`: AUTO, ONE_PROMPT or a Composition (above)."""
    text: str
    speaker: str | None = None
    language: str | None = "auto"
    instruct: str | None = None
    voice: Voice | None = None
    sampling: SamplingParams | None = None
    streaming_text: bool | None = None
    lexicon: object | None = None
    join: "JoinSettings | None" = None
    chunk_seeds: dict[int, int] | None = None
    cast: dict | None = None
    budget: "Budget | None" = None
    pauses: "Pauses | None" = None
    hold_ms: float = 0.0
    plan: "str | Composition" = AUTO

    def validate(self) -> None:
        """ValueError (InputError for sampling) naming the field, for a value no take could use: the one
        check of a request's own numbers, wherever it came in (what the model refuses, a speaker or a
        text too long for one prompt, Engine.plan says)."""
        from ..text.compose import Composition
        if not isinstance(self.text, str):
            raise ValueError(f"text must be a string, got {type(self.text).__name__}")
        if self.sampling is not None:
            self.sampling.validate()
        if _number(self.hold_ms) is None or not 0 <= self.hold_ms <= MAX_HOLD_MS:
            raise ValueError(f"hold_ms must be from 0 to {MAX_HOLD_MS}, got {self.hold_ms!r}")
        for part in (self.pauses, self.budget, self.join):
            if part is not None:
                part.validate()
        for index, seed in (self.chunk_seeds or {}).items():
            if _whole(index) is None or index < 0 or _whole(seed) is None or not 0 <= seed < 2 ** 64:
                raise ValueError(f"chunk_seeds: chunk {index!r} -> {seed!r}: a chunk's number and a seed in [0, 2**64)")
        if not (isinstance(self.plan, Composition) or self.plan in (AUTO, ONE_PROMPT)):
            raise ValueError(f"plan must be {AUTO!r}, {ONE_PROMPT!r} or a text.compose.Composition, got {self.plan!r}")


@dataclass
class Chunk:
    audio: np.ndarray          # the samples of `frames` new frames
    first_frame: int
    frames: int
    timings: Timings           # running totals so far
