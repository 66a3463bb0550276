"""A composed text (text/compose.py) spoken: every chunk a request of its own through the batched
engine, joined into one take (text/join.py). The first chunk starts alone, so the first audio comes as
soon as for one sentence; the others join its batch at the next frame boundary and run together.
Each chunk's audio is exactly that chunk synthesized alone with its seed (the batcher's promise), so
regenerating one chunk with a new seed leaves the others' audio as it was."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

import numpy as np

from .requests import Chunk, Request, Result, SamplingParams, Timings
from ..text.compose import Cast, Composition, PlannedChunk, compose
from ..text.join import JoinSettings, TakeAssembler, join, join_offsets

# (the Engine is named in annotations only: synthesis.Engine.speak imports this module)


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


def chunk_request(chunk: PlannedChunk, sampling: SamplingParams, max_frames: int | None = None,
                  streaming_text: bool | None = None) -> Request:
    cast = chunk.cast
    chunk_sampling = replace(sampling, seed=chunk.seed)
    if max_frames is not None:
        chunk_sampling.max_frames = max_frames
    return Request(chunk.text, speaker=cast.speaker, language=chunk.language, instruct=cast.instruct,
                   voice=cast.voice, sampling=chunk_sampling, streaming_text=streaming_text)


def speak(engine: "Engine", composition: Composition, sampling: SamplingParams | None = None,
          join_settings: JoinSettings | None = None, max_batch: int = 4,
          on_chunk: Callable[[ChunkTake, int], None] | None = None,
          max_frames_of: Callable[[PlannedChunk], int] | None = None,
          streaming_text: bool | None = None) -> LongResult:
    """Every chunk of `composition`, joined (a LongStream run to its end). `on_chunk(take,
    chunks_in_all)` is called as each chunk is done, in order (progress bars); `max_frames_of(chunk)`
    sets a chunk's frame limit (the bench: random weights never end an utterance); `streaming_text`:
    each chunk's prompt as Engine.stream takes it."""
    join_settings = join_settings or JoinSettings()
    stream = LongStream(engine, composition, sampling, join_settings, max_batch, max_frames_of,
                        streaming_text=streaming_text)
    told = 0
    for _ in stream:
        while on_chunk is not None and told < len(stream.takes):
            on_chunk(stream.takes[told], len(composition.chunks))
            told += 1
    takes = stream.takes
    while on_chunk is not None and told < len(takes):
        on_chunk(takes[told], len(composition.chunks))
        told += 1
    warnings = [f"chunk {t.plan.index + 1} (line {t.plan.at.line}) reached its frame limit "
                f"({len(t.result.codes)} frames) before it ended: its speech may be cut or run on"
                for t in takes if t.hit_limit]
    t = stream.result.timings
    return LongResult(stream.result.audio, engine.info.sample_rate, takes, composition, join_settings,
                      ttfa_ms=t.ttfa_ms, total_ms=t.total_ms, warnings=warnings)


def compose_request(engine: "Engine", request: Request, lexicon=None) -> Composition:
    """A request's text as a plan, in the request's own voice and language; dialogue turns and
    [voice=...] may name the model's speakers (a script line, a server request); `lexicon`: a
    text.lexicon.Lexicon whose rules apply."""
    from ..voices.cast import model_cast
    seed = request.sampling.seed if request.sampling is not None else 0
    return compose(request.text, default=Cast(speaker=request.speaker, instruct=request.instruct, voice=request.voice),
                   language=request.language or "auto", cast=model_cast(engine.model),
                   languages=engine.info.languages, lexicon=lexicon, seed=seed, count_tokens=engine.count_text_tokens)


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


def plan_take(engine: "Engine", request: Request, lexicon=None, join: JoinSettings | None = None,
              chunk_seeds: dict[int, int] | None = None) -> tuple[Request | None, Composition]:
    """(the one prompt's request, or None for a long take; the plan) of `request` (one_prompt_text).
    `chunk_seeds`: chunk index -> seed, chunks made again while the others keep theirs (and audio)."""
    sampling = request.sampling or SamplingParams.from_model(engine.info)   # (its seed is chunk 0's)
    plan = compose_request(engine, replace(request, sampling=sampling), lexicon)
    for index, seed in (chunk_seeds or {}).items():
        plan = plan.reseeded(int(index), int(seed))
    text = one_prompt_text(request.text, plan, join)
    if text is None:
        return None, plan
    return replace(chunk_request(plan.chunks[0], sampling, streaming_text=request.streaming_text), text=text), plan


def start_request(engine: "Engine", request: Request, batcher, lexicon=None):
    """`request` running on `batcher`: as one stream when it is one prompt (plan_take), else as a
    ComposedStream of its chunks."""
    prompt, plan = plan_take(engine, request, lexicon)
    if prompt is not None:
        return engine.submit(prompt, batcher)
    return ComposedStream(engine, plan, request.sampling or SamplingParams.from_model(engine.info), batcher)


class ComposedStream:
    """A composed text's chunks as streams on a shared batcher (render's lines, many texts at once),
    ended when every chunk has ended; `result` is then the take as one Result: the chunks' audio
    joined, their codes one after another, their per-frame timings in order. What render's
    executor waits on, in place of a one-request AudioStream."""

    def __init__(self, engine: "Engine", composition: Composition, sampling: SamplingParams, batcher,
                 join_settings: JoinSettings | None = None):
        self._engine, self._composition = engine, composition
        self._join = join_settings or JoinSettings()
        self._join.validate()
        self._start = time.perf_counter()
        requests = [chunk_request(p, sampling) for p in composition.chunks]
        for r in requests:   # every chunk checked (ValueError) before any is submitted: none left running
            engine.prepare(r.text, r.speaker, r.language, r.instruct, r.voice, r.sampling, r.streaming_text)
        self.streams = [engine.submit(r, batcher) for r in requests]
        self._result: Result | None = None

    @property
    def ended(self) -> bool:
        return all(s.ended for s in self.streams)

    @property
    def error(self) -> BaseException | None:
        return next((s.error for s in self.streams if s.error is not None), None)

    def cancel(self) -> None:
        for s in self.streams:
            s.cancel()

    def join(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.perf_counter() + timeout
        for s in self.streams:
            left = None if deadline is None else max(0.0, deadline - time.perf_counter())
            if not s.join(left):
                return False
        return True

    @property
    def result(self) -> Result | None:
        if self._result is None and self.ended and self.error is None:
            results = [s.result for s in self.streams]
            audio = join(_pieces(self._composition, [r.audio for r in results]), self._engine.info.sample_rate,
                         self._join)
            reasons = {r.stop_reason for r in results}
            reason = next((x for x in ("cancelled", "limit") if x in reasons), "eos")
            first = results[0].timings
            timings = replace(first, prefill_ms=sum(r.timings.prefill_ms for r in results),
                              talker_ms=[x for r in results for x in r.timings.talker_ms],
                              code_predictor_ms=[x for r in results for x in r.timings.code_predictor_ms],
                              decoder_ms=[x for r in results for x in r.timings.decoder_ms],
                              frames=sum(r.timings.frames for r in results),
                              total_ms=1000 * (time.perf_counter() - self._start))
            self._result = Result(audio, self._engine.info.sample_rate,
                                  np.concatenate([r.codes for r in results]), timings, reason,
                                  results[0].placement_report)
        return self._result


class LongStream:
    """Iterator of Chunk over a composed take, in the take's order: the first chunk frame by frame
    as it is made (first audio as soon as for one sentence), the others joining its batch after its
    first audio. Each Chunk's audio is the take's next final samples (text.join.TakeAssembler), so
    together they are the joined take exactly; frames and per-frame timings run on across chunks.
    `cancel()` stops every chunk within a frame; `result` (a Result of the whole take) and `takes`
    (each chunk's own) are set once it has been iterated to the end (`wait()` iterates what is left).
    `streaming_text`: each chunk's prompt as Engine.stream takes it. `batcher`: one to share with
    other streams (a server's), else one of its own, `max_batch` wide."""

    def __init__(self, engine: "Engine", composition: Composition, sampling: SamplingParams | None = None,
                 join_settings: JoinSettings | None = None, max_batch: int = 4,
                 max_frames_of: Callable[[PlannedChunk], int] | None = None, streaming_text: bool | None = None,
                 batcher=None):
        self._engine, self.composition = engine, composition
        self._join = join_settings or JoinSettings()
        self._assembler = TakeAssembler(engine.info.sample_rate, self._join)
        sampling = sampling or SamplingParams.from_model(engine.info)
        self._requests = [chunk_request(p, sampling, max_frames_of(p) if max_frames_of else None, streaming_text)
                          for p in composition.chunks]
        for r in self._requests[1:]:   # every chunk checked (ValueError) before the first starts
            engine.prepare(r.text, r.speaker, r.language, r.instruct, r.voice, r.sampling, r.streaming_text)
        self._batcher = batcher or engine.batcher(max(1, max_batch))
        self._start = time.perf_counter()
        self._streams = [engine.submit(self._requests[0], self._batcher)]
        self._cancelled = False
        self._fed: list = []   # the pieces the assembler has had, in order (the result is their join)
        self.result: Result | None = None
        self.error: BaseException | None = None
        self.takes: list[ChunkTake] = []
        self._iterator = self._run()

    def __iter__(self) -> "LongStream":
        return self

    def __next__(self) -> Chunk:
        try:
            return next(self._iterator)
        except StopIteration:
            raise
        except BaseException as e:
            self.error = e
            raise

    def cancel(self) -> None:
        self._cancelled = True
        for s in self._streams:
            s.cancel()

    @property
    def ended(self) -> bool:
        """The take is over (result or error is set)."""
        return self.result is not None or self.error is not None

    def wait(self, timeout: float | None = None) -> Result | None:
        """Iterates what is left (its audio goes to `result` only) until the take is over, or
        `timeout` seconds have passed (then None); raises what stopped it."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        while not self.ended:
            if deadline is not None and time.perf_counter() >= deadline:
                return None
            try:
                next(self)
            except StopIteration:
                break
        if self.error is not None:
            raise self.error
        return self.result

    def __enter__(self) -> "LongStream":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()
        if not self.ended:
            try:
                self.wait()
            except BaseException:   # the exit is after a failure or a cancel: nothing to report
                pass

    def _run(self) -> Iterator[Chunk]:
        timings = Timings(frame_seconds=1 / self._engine.info.frame_rate)
        frames_before, chunk_index = 0, 0
        try:
            for piece, stream in self._in_order():
                if stream is None:
                    self._assembler.pause(piece)
                    self._fed.append(piece)
                    continue
                for part in stream:
                    if chunk_index == 0:
                        self._first_audio()
                    audio = self._assembler.audio(part.audio)
                    t = part.timings
                    running = replace(timings, talker_ms=timings.talker_ms + t.talker_ms,
                                      code_predictor_ms=timings.code_predictor_ms + t.code_predictor_ms,
                                      decoder_ms=timings.decoder_ms + t.decoder_ms, frames=frames_before + t.frames,
                                      prefill_ms=timings.prefill_ms + t.prefill_ms)
                    if not timings.ttfa_ms and len(audio):
                        timings.ttfa_ms = 1000 * (time.perf_counter() - self._start)
                    running.ttfa_ms, running.total_ms = timings.ttfa_ms, 1000 * (time.perf_counter() - self._start)
                    yield Chunk(audio, frames_before + part.first_frame, part.frames, running)
                result = stream.wait()
                self.takes.append(ChunkTake(self._planned(piece), result))
                self._fed.append(result.audio)
                t = result.timings
                timings.talker_ms += t.talker_ms
                timings.code_predictor_ms += t.code_predictor_ms
                timings.decoder_ms += t.decoder_ms
                timings.prefill_ms += t.prefill_ms
                frames_before += t.frames
                timings.frames = frames_before
                tail = self._assembler.end_chunk()
                if len(tail):
                    yield Chunk(tail, frames_before, 0, replace(timings))
                chunk_index += 1
                if result.stop_reason == "cancelled":
                    break
            rest = self._assembler.finish()
            timings.total_ms = 1000 * (time.perf_counter() - self._start)
            if len(rest):
                yield Chunk(rest, frames_before, 0, replace(timings))
            self._finish(timings)
        finally:
            if self.result is None:   # a failure, or a consumer that stopped iterating: nothing left running
                self.cancel()

    def _in_order(self) -> Iterator[tuple[PlannedChunk | float, object]]:
        """The take's pieces in order, each chunk with its stream (a pause with None)."""
        streams = iter(range(len(self._requests)))
        for piece in self.composition.pieces:
            yield (piece, self._streams[next(streams)]) if isinstance(piece, PlannedChunk) else (piece, None)

    def _first_audio(self) -> None:
        """The first chunk has been heard: the others join its batch."""
        if len(self._streams) == 1 and not self._cancelled:
            self._streams += [self._engine.submit(r, self._batcher, follows=True) for r in self._requests[1:]]

    def _planned(self, piece: PlannedChunk) -> PlannedChunk:
        return piece

    def _finish(self, timings: Timings) -> None:
        pieces = self._fed
        spans = join_offsets(pieces, self._engine.info.sample_rate, self._join)
        self.takes = [replace(t, span=s) for t, s in zip(self.takes, spans)]
        reasons = {t.result.stop_reason for t in self.takes}
        reason = "cancelled" if self._cancelled else next((x for x in ("limit",) if x in reasons), "eos")
        codes = np.concatenate([t.result.codes for t in self.takes]) if self.takes else np.zeros((0, 16), np.int32)
        self.result = Result(join(pieces, self._engine.info.sample_rate, self._join), self._engine.info.sample_rate,
                             codes, timings, reason, self.takes[0].result.placement_report if self.takes else [])


def redo_chunk(engine: "Engine", result: LongResult, index: int, seed: int,
               sampling: SamplingParams | None = None) -> LongResult:
    """`result` with chunk `index` synthesized again with `seed`; every other chunk's audio is kept."""
    composition = result.composition.reseeded(index, seed)
    plan = next(c for c in composition.chunks if c.index == index)
    sampling = sampling or SamplingParams.from_model(engine.info)
    request = chunk_request(plan, sampling)
    redone = engine.synthesize(request.text, one_prompt=True, speaker=request.speaker, language=request.language,
                               instruct=request.instruct, voice=request.voice, sampling=request.sampling)
    chunks = [ChunkTake(plan, redone) if c.plan.index == index else c for c in result.chunks]
    return replace(result, composition=composition, chunks=chunks).rejoined()


