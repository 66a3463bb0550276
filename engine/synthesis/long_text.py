"""What a request's text becomes, decided in one place for every front end: one prompt, or a take
of chunks (text/compose.py's plan, each chunk a request of its own through the batched engine, joined
into one take by text/join.py; chunked_take.py speaks them). Engine.plan is plan_take: the text
composed once (compose_args: the one place its arguments are assembled), every prompt checked before
anything starts. Each chunk's audio is exactly that chunk synthesized alone with its seed (the
batcher's promise), so regenerating one chunk with a new seed leaves the others' audio as it was."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

import numpy as np

from .prompt_stream import build_prompt
from .requests import ONE_PROMPT, Request, Result, SamplingParams
from ..text.compose import Cast, Composition, Pauses, PlannedChunk, compose
from ..text.join import JoinSettings, join, join_offsets
from ..text.sentences import Budget

if TYPE_CHECKING:
    from .host import TakeHost


@dataclass
class ChunkTake:
    """One chunk of a long take: its plan, its own result, and where it lies in the joined audio."""
    plan: PlannedChunk
    result: Result
    span: tuple[int, int] = (0, 0)   # [start, end) samples in the joined take

    @property
    def hit_limit(self) -> bool:
        return self.result.stop_reason == "limit"


@dataclass
class LongResult:
    audio: np.ndarray
    sample_rate: int
    chunks: list[ChunkTake]
    composition: Composition
    join: JoinSettings
    ttfa_ms: float = 0.0
    total_ms: float = 0.0
    warnings: list[str] = field(default_factory=list)

    @property
    def audio_seconds(self) -> float:
        return len(self.audio) / self.sample_rate

    @property
    def rtf(self) -> float:
        return self.total_ms / 1000 / self.audio_seconds if len(self.audio) else float("nan")

    @property
    def codes(self) -> np.ndarray:
        return np.concatenate([c.result.codes for c in self.chunks])

    def rejoined(self, join_settings: JoinSettings | None = None) -> "LongResult":
        """The same chunks' audio joined again (other pauses or trimming, or after a chunk was redone)."""
        settings = join_settings or self.join
        pieces = _pieces(self.composition, [c.result.audio for c in self.chunks])
        spans = join_offsets(pieces, self.sample_rate, settings)
        chunks = [replace(c, span=s) for c, s in zip(self.chunks, spans)]
        return replace(self, audio=join(pieces, self.sample_rate, settings), chunks=chunks, join=settings)


def _pieces(composition: Composition, audio: list[np.ndarray]) -> list:
    """The composition's pieces with each chunk replaced by its audio (in order)."""
    chunks = iter(audio)
    return [next(chunks) if isinstance(p, PlannedChunk) else p for p in composition.pieces]


class PlanError(ValueError):
    """Prompts of a plan the model refuses, each with its chunk (text.compose.PlannedChunk; None for a
    prompt as written) and why; the message is the first one's."""

    def __init__(self, problems: list[tuple[PlannedChunk | None, str]]):
        self.problems = problems
        super().__init__(problems[0][1])


@dataclass
class TakePlan:
    """A Request as Engine.plan makes it, every prompt checked: spoken as one prompt (`prompt`), or
    as a take of its chunks (`prompt` None). `chunks`: each chunk's own request, one prompt each, in
    the composition's order (a prompt as written: that prompt); `composition`: the text's plan (None
    for a prompt as written). Engine.take and Engine.open_take speak it as it is."""
    request: Request                  # as asked, its sampling given (the model's defaults where it had none)
    chunks: list[Request]
    composition: Composition | None = None
    prompt: Request | None = None

    @property
    def join(self) -> JoinSettings:
        return self.request.join or JoinSettings()

    def with_max_frames(self, frames_of: Callable[[Request], int]) -> "TakePlan":
        """The same plan with each chunk's frame limit `frames_of(chunk)` (the benches: random weights
        never end an utterance)."""
        def limited(r: Request) -> Request:
            return replace(r, sampling=replace(r.sampling, max_frames=frames_of(r)))
        return replace(self, chunks=[limited(r) for r in self.chunks],
                       prompt=limited(self.prompt) if self.prompt is not None else None)


def compose_args(host: "TakeHost", request: Request, count_tokens: Callable[[str], int] | None = None) -> dict:
    """text.compose.compose's arguments for `request` (its text aside), in its own voice and language
    with the model's speakers and `request.cast` to name, for this model's languages and tokenizer:
    the one place they are assembled (a live take plans with them as its text grows)."""
    from ..voices.cast import model_cast
    return dict(default=Cast(speaker=request.speaker, instruct=request.instruct, voice=request.voice),
                language=request.language or "auto", cast={**model_cast(host.model), **(request.cast or {})},
                languages=host.info.languages, lexicon=request.lexicon, budget=request.budget or Budget(),
                pauses=request.pauses or Pauses(), seed=request.sampling.seed if request.sampling else 0,
                count_tokens=count_tokens or host.count_text_tokens)


def compose_text(host: "TakeHost", request: Request) -> Composition:
    """`request`'s text as the long-text front end plans it (MarkupError names line and column)."""
    return compose(request.text, **compose_args(host, request))


def chunk_request(chunk: PlannedChunk, sampling: SamplingParams, streaming_text: bool | None = None) -> Request:
    """One chunk as a request of its own: its words as one prompt, in its voice and language, with its seed."""
    cast = chunk.cast
    return Request(chunk.text, speaker=cast.speaker, language=chunk.language, instruct=cast.instruct,
                   voice=cast.voice, sampling=replace(sampling, seed=chunk.seed), streaming_text=streaming_text,
                   plan=ONE_PROMPT)


def one_prompt_text(text: str, plan: Composition, join: JoinSettings | None = None) -> str | None:
    """The one rule, for every front end (say, the workbench, the server, render, the benches), of
    whether a request is one prompt or a long take: one prompt when its plan is one chunk with no
    pause, no word said another way (a lexicon's rewrites are listed with the take's chunk) and no
    joining work asked for (trimmed silence). Its prompt is then the text as given where the plan
    only respaced it (the exact prompt the reference would get), else the chunk's words (markup
    taken out). None: a long take of the plan's chunks."""
    if len(plan.pieces) != 1 or plan.chunks[0].rewrites or (join is not None and join.trim_silence):
        return None
    chunk = plan.chunks[0]
    return text if "".join(chunk.text.split()) == "".join(text.split()) else chunk.text


def plan_take(host: "TakeHost", request: Request) -> TakePlan:
    """`request` planned (Engine.plan): its text composed, chunk seeds applied, one prompt or chunks
    by the one rule (or as it asks: a prompt as written, or the composition it gives), and every prompt
    it will speak checked (PlanError lists them all)."""
    request = replace(request, sampling=request.sampling or SamplingParams.from_model(host.info))
    request.validate()
    if request.plan == ONE_PROMPT:
        return TakePlan(request, [request], prompt=_checked(host, [(None, request)])[0])
    given = isinstance(request.plan, Composition)
    composition = request.plan if given else compose_text(host, request)
    for index, seed in (request.chunk_seeds or {}).items():
        if int(index) < len(composition.chunks):
            composition = composition.reseeded(int(index), int(seed))
    chunks = [chunk_request(c, request.sampling, request.streaming_text) for c in composition.chunks]
    text = None if given else one_prompt_text(request.text, composition, request.join)
    if text is not None:   # (its chunk is the same words: checking the prompt checks both)
        prompt = _checked(host, [(composition.chunks[0], replace(chunks[0], text=text))])[0]
        return TakePlan(request, chunks, composition, prompt)
    return TakePlan(request, _checked(host, list(zip(composition.chunks, chunks))), composition)


def _checked(host: "TakeHost", prompts: list[tuple[PlannedChunk | None, Request]]) -> list[Request]:
    problems = []
    for chunk, r in prompts:
        try:
            build_prompt(host, r)
        except ValueError as e:
            problems.append((chunk, str(e)))
    if problems:
        raise PlanError(problems)
    return [r for _, r in prompts]


def redo_chunk(engine, result: LongResult, index: int, seed: int,
               sampling: SamplingParams | None = None) -> LongResult:
    """`result` with chunk `index` synthesized again with `seed`; every other chunk's audio is kept."""
    composition = result.composition.reseeded(index, seed)
    plan = next(c for c in composition.chunks if c.index == index)
    redone = engine.take(chunk_request(plan, sampling or SamplingParams.from_model(engine.info)))
    chunks = [ChunkTake(plan, redone) if c.plan.index == index else c for c in result.chunks]
    return replace(result, composition=composition, chunks=chunks).rejoined()
