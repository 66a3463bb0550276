"""What the takes and their streams need of the engine that makes them (synthesis.engine.Engine is
one): all public, so a stream, a chunked take or a live take never reaches into the engine, and the
engine is a front door (Engine.plan, take, open_take) that also serves as this host."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..model_files.model_file import ModelFile, ModelInfo
    from .batch import Batcher
    from .overlap import DecoderWorker
    from .prompt import PromptBuilder, PromptPlan
    from .requests import SamplingParams
    from .speech_decoder import SpeechDecoder
    from .threads import ThreadPolicy


class TakeHost(Protocol):
    """The model, its prompts, the lock and thread policy frames are made under, the decoders, the
    shared batch worker, and the native calls a stream's runner makes (the caller holds `lock`)."""
    model: "ModelFile"
    info: "ModelInfo"
    prompts: "PromptBuilder"                 # the model's prompts (tokenizer, special ids, checks)
    lock: threading.Lock                     # held while frames are made or the placement changes
    thread_policy: "ThreadPolicy"
    decoder: "SpeechDecoder"
    overlap_worker: "DecoderWorker | None"   # decoding beside generation (engine/synthesis/overlap.py), or None
    beside_decoder: "SpeechDecoder"          # the decoder on that worker's pool

    @property
    def shared_batcher(self) -> "Batcher":
        """The batch worker every stream of the host shares unless given another (a live take's always)."""
        ...

    def count_text_tokens(self, text: str) -> int: ...
    def max_frames_for(self, plan: "PromptPlan", sampling: "SamplingParams", body_tokens: int | None = None) -> int: ...
    def open_session(self, plan: "PromptPlan", sampling: "SamplingParams", text_open: bool = False): ...
    def generate_frames(self, plan: "PromptPlan", sampling: "SamplingParams", on_frame) -> dict: ...
    def step(self, sessions: list) -> None: ...
    def report_held(self) -> list[dict]: ...
