"""A take of several chunks as it is made (ChunkedTake): each chunk a prompt of its own on a batch
worker, the take's audio the chunks joined with their pauses (text.join.TakeAssembler), in order, as
they are heard. Its pieces come from a source: a plan every chunk of which is known (PlannedPieces:
Engine.open_take of a long text, render's lines, the server's requests), or a text still being
written (live_take.LiveTake, which plans its chunks as their words are known). start_take starts a
TakePlan as one prompt's stream or as a chunked take; whole_take waits for either's whole take."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, Protocol

import numpy as np

from .batch import Batcher
from .long_text import ChunkTake, LongResult, TakePlan
from .prompt_stream import DECODE_EVERY, PromptStream, open_prompt
from .requests import Chunk, Result, Timings
from ..text.compose import PlannedChunk
from ..text.join import JoinSettings, TakeAssembler, join, join_offsets

if TYPE_CHECKING:
    from ..model_files.model_file import ModelInfo
    from .host import TakeHost

CHUNK_BATCH = 4   # a chunked take's own batch worker, where its engine has no shared one


class TakePieces(Protocol):
    """Where a chunked take's pieces come from."""
    def in_order(self) -> Iterator[tuple[PlannedChunk | float, object]]:
        """The take's pieces in order, each chunk with its stream, a pause (ms) with None; waits for
        pieces not yet known (a live take's)."""
        ...

    def planned(self, piece: PlannedChunk) -> PlannedChunk:
        """The chunk as the take's plan holds it now (a live take settles a chunk's words late)."""
        ...

    def streams(self) -> list:
        """The chunks' streams begun so far."""
        ...

    def ended(self) -> bool:
        """Every chunk's generation has ended and no more will begin."""
        ...

    def cancel(self) -> None: ...


class PlannedPieces:
    """A TakePlan's pieces, every chunk's stream started at once on `batcher`: its first chunk first,
    the others as a take's later chunks (admitted after every take's first chunk, prefilled after its
    first frame: PromptStream.follows), so the first audio comes as soon as for one sentence."""

    def __init__(self, host: "TakeHost", plan: TakePlan, batcher, decode_every: int):
        self.composition = plan.composition
        self._streams = []
        try:
            for i, request in enumerate(plan.chunks):
                self._streams.append(open_prompt(host, request, batcher, decode_every, follows=i > 0))
        except BaseException:   # (checked by Engine.plan: a plan changed since) nothing left running
            self.cancel()
            raise

    def in_order(self) -> Iterator[tuple[PlannedChunk | float, object]]:
        streams = iter(self._streams)
        for piece in self.composition.pieces:
            yield (piece, next(streams)) if isinstance(piece, PlannedChunk) else (piece, None)

    def planned(self, piece: PlannedChunk) -> PlannedChunk:
        return piece

    def streams(self) -> list:
        return self._streams

    def ended(self) -> bool:
        return all(s.ended for s in self._streams)

    def cancel(self) -> None:
        for s in self._streams:
            s.cancel()


class ChunkedTake:
    """Iterator of Chunk over a take of several chunks, in the take's order: the first chunk frame by
    frame as it is made, then the others (made meanwhile, beside it). Each Chunk's audio is the
    take's next final samples, so together they are the joined take exactly; frames and per-frame
    timings run on across chunks. `cancel()` stops every chunk within a frame; `result` (a Result of
    the whole take) and `takes` (each chunk's own) are set once it has been iterated to the end
    (`wait()` iterates what is left; `whole()` gives the take as a LongResult); `ended` once every
    chunk's generation has ended (`join` waits for that without iterating)."""

    def __init__(self, info: "ModelInfo", pieces: TakePieces, join_settings: JoinSettings | None = None,
                 composition=None):
        self._info, self._pieces = info, pieces
        self.composition = composition   # the take's plan (text.compose.Composition), once known
        self._join = join_settings or JoinSettings()
        self._join.validate()
        self._assembler = TakeAssembler(info.sample_rate, self._join)
        self.start = time.perf_counter()   # (a live take's counts from its first text)
        self._cancelled = False
        self._fed: list = []   # the pieces the assembler has had, in order (the result is their join)
        self._turn = threading.Lock()   # one caller of the iterator at a time
        self.result: Result | None = None
        self.error: BaseException | None = None
        self.takes: list[ChunkTake] = []
        self._iterator = self._run()

    def __iter__(self) -> "ChunkedTake":
        return self

    def __next__(self) -> Chunk:
        with self._turn:
            try:
                return next(self._iterator)
            except StopIteration:
                raise
            except BaseException as e:
                self.error = e
                raise

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        self._cancelled = True
        self._pieces.cancel()

    @property
    def ended(self) -> bool:
        """The take is over (result or error is set), or every chunk's generation has ended."""
        return self.result is not None or self.error is not None or self._pieces.ended()

    def join(self, timeout: float | None = None) -> bool:
        """Blocks until every chunk begun has ended (drains nothing, raises nothing); False on timeout."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        for s in self._pieces.streams():
            if not s.join(None if deadline is None else max(0.0, deadline - time.perf_counter())):
                return False
        return self.ended

    def wait(self, timeout: float | None = None) -> Result | None:
        """Iterates what is left (its audio goes to `result` only) until the take is over, or
        `timeout` seconds have passed (then None); raises what stopped it."""
        deadline = None if timeout is None else time.perf_counter() + timeout
        while self.result is None and self.error is None:
            if deadline is not None and time.perf_counter() >= deadline:
                return None
            try:
                next(self)
            except StopIteration:
                break
        if self.error is not None:
            raise self.error
        return self.result

    def whole(self) -> LongResult:
        """The whole take once it has ended (wait), with each chunk's own result and where it lies,
        and a warning for each chunk that reached its frame limit."""
        result = self.wait()
        warnings = [f"chunk {t.plan.index + 1} (line {t.plan.at.line}) reached its frame limit "
                    f"({len(t.result.codes)} frames) before it ended: its speech may be cut or run on"
                    for t in self.takes if t.hit_limit]
        t = result.timings
        return LongResult(result.audio, result.sample_rate, self.takes, self.composition, self._join,
                          ttfa_ms=t.ttfa_ms, total_ms=t.total_ms, warnings=warnings)

    def __enter__(self) -> "ChunkedTake":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()
        if self.result is None and self.error is None:
            try:
                self.wait()
            except BaseException:   # the exit is after a failure or a cancel: nothing to report
                pass

    def _run(self) -> Iterator[Chunk]:
        timings = Timings(frame_seconds=1 / self._info.frame_rate)
        frames_before = 0
        try:
            for piece, stream in self._pieces.in_order():
                if stream is None:
                    self._assembler.pause(piece)
                    self._fed.append(piece)
                    continue
                for part in stream:
                    yield self._heard(part, timings, frames_before)
                result = stream.wait()
                self.takes.append(ChunkTake(self._pieces.planned(piece), result))
                self._fed.append(result.audio)
                frames_before = self._add(timings, result.timings, frames_before)
                tail = self._assembler.end_chunk()
                if len(tail):
                    yield Chunk(tail, frames_before, 0, replace(timings))
                if result.stop_reason == "cancelled":
                    break
            rest = self._assembler.finish()
            timings.total_ms = 1000 * (time.perf_counter() - self.start)
            if len(rest):
                yield Chunk(rest, frames_before, 0, replace(timings))
            self._finish(timings)
        finally:
            if self.result is None:   # a failure, or a consumer that stopped iterating: nothing left running
                self.cancel()

    def _heard(self, part: Chunk, timings: Timings, frames_before: int) -> Chunk:
        """A chunk's part as the take's next final samples, with the take's running timings."""
        audio = self._assembler.audio(part.audio)
        t = part.timings
        running = replace(timings, talker_ms=timings.talker_ms + t.talker_ms,
                          code_predictor_ms=timings.code_predictor_ms + t.code_predictor_ms,
                          decoder_ms=timings.decoder_ms + t.decoder_ms, frames=frames_before + t.frames,
                          prefill_ms=timings.prefill_ms + t.prefill_ms)
        if not timings.ttfa_ms and len(audio):
            timings.ttfa_ms = 1000 * (time.perf_counter() - self.start)
        running.ttfa_ms, running.total_ms = timings.ttfa_ms, 1000 * (time.perf_counter() - self.start)
        return Chunk(audio, frames_before + part.first_frame, part.frames, running)

    @staticmethod
    def _add(timings: Timings, t: Timings, frames_before: int) -> int:
        """A finished chunk's timings added to the take's; the frames before the next chunk."""
        timings.talker_ms += t.talker_ms
        timings.code_predictor_ms += t.code_predictor_ms
        timings.decoder_ms += t.decoder_ms
        timings.prefill_ms += t.prefill_ms
        timings.frames = frames_before + t.frames
        return timings.frames

    def _finish(self, timings: Timings) -> None:
        pieces, rate = self._fed, self._info.sample_rate
        spans = join_offsets(pieces, rate, self._join)
        self.takes = [replace(t, span=s) for t, s in zip(self.takes, spans)]
        reasons = {t.result.stop_reason for t in self.takes}
        reason = "cancelled" if self._cancelled else next((x for x in ("limit",) if x in reasons), "eos")
        codes = np.concatenate([t.result.codes for t in self.takes]) if self.takes else np.zeros((0, 16), np.int32)
        self.result = Result(join(pieces, rate, self._join), rate, codes, timings, reason,
                             self.takes[0].result.placement_report if self.takes else [])


def start_take(host: "TakeHost", plan: TakePlan, batcher: Batcher | None, decode_every: int = DECODE_EVERY):
    """`plan` started: one prompt's PromptStream (on `batcher`, else on a thread of its own), or a
    ChunkedTake of its chunks (on `batcher`, else on one of its own, CHUNK_BATCH wide)."""
    if plan.prompt is not None:
        return open_prompt(host, plan.prompt, batcher, decode_every)
    pieces = PlannedPieces(host, plan, batcher or Batcher(host, CHUNK_BATCH), decode_every)
    return ChunkedTake(host.info, pieces, plan.join, plan.composition)


def whole_take(take: "PromptStream | ChunkedTake") -> "Result | LongResult":
    """A started take's whole once it has ended: one prompt's Result, a chunked take's LongResult."""
    return take.whole() if isinstance(take, ChunkedTake) else take.wait()
