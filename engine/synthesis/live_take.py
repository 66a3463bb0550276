"""A live take: a text still being written (a language model's answer, an operator typing) spoken
while it is written, planned as it comes: text.open_plan says which chunks of the whole text's plan
the text so far decides, and how far into the next one; each chunk is an OpenPromptStream
(open_prompt.py) from its first known words, on the engine's shared batcher, made after the chunk
before it; the take's audio is a ChunkedTake (chunked_take.py) of those pieces, in order, as they are
heard.

Property: the codes and audio are those of Engine.take(the whole text, streaming_text=True), bit for
bit, whatever the split and timing of the deltas: one prompt when long_text.one_prompt_text says
the whole text is one, else its chunks, seeds and pauses. Until a second chunk is certain, the first
is fed only what the two agree on (the text as written, or its chunk's words). A text's leading
white space is not part of it (a turn often starts with the space before its first word). So deltas
may be planned in any groups: write() gathers them while the model still has GATHER_WHILE_UNREAD
tokens of the chunk being written to read (planning each word as it comes would take the cores from
the speech for nothing), and plans them when it runs low."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from functools import lru_cache
from os.path import commonprefix
from typing import TYPE_CHECKING, Iterator

from .chunked_take import ChunkedTake
from .long_text import compose_args, one_prompt_text
from .open_prompt import OpenPromptStream
from .requests import AUTO, Chunk, Request, Result, SamplingParams
from ..text.compose import PlannedChunk, compose
from ..text.join import JoinSettings
from ..text.open_plan import OpenPlan, compose_open

if TYPE_CHECKING:
    from .host import TakeHost

GATHER_WHILE_UNREAD = 4   # text tokens (320 ms of reading) the model has left that let the next deltas gather
_GATHER_POLL_S = 0.04     # (half a frame: the model never runs out while deltas wait)


class _LivePieces:
    """A live take's pieces so far, in order: PlannedChunk (final once settled) with its stream, ms of
    silence; what its ChunkedTake reads (chunked_take.TakePieces), waiting for those not yet written."""

    def __init__(self):
        self.pieces: list = []
        self.chunk_streams: list[OpenPromptStream] = []   # one per chunk in `pieces`, in order
        self.known: list[str] = []     # what each chunk's stream was offered
        self.text_closed = False
        self.stopped = False
        self._changed = threading.Condition()

    def add(self, piece, stream: OpenPromptStream | None = None) -> None:
        with self._changed:
            self.pieces.append(piece)
            if stream is not None:
                self.chunk_streams.append(stream)
                self.known.append("")
            self._changed.notify_all()

    def last_stream(self) -> OpenPromptStream | None:
        with self._changed:
            return self.chunk_streams[-1] if self.chunk_streams else None

    def notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def in_order(self) -> Iterator[tuple[PlannedChunk | float, object]]:
        position, chunk = 0, 0
        while True:
            with self._changed:
                while position >= len(self.pieces) and not (self.text_closed or self.stopped):
                    self._changed.wait()
                if position >= len(self.pieces):
                    return
                piece = self.pieces[position]
            if isinstance(piece, PlannedChunk):
                yield piece, self.chunk_streams[chunk]
                chunk += 1
            else:
                yield piece, None
            position += 1

    def planned(self, piece: PlannedChunk) -> PlannedChunk:
        return next(p for p in self.pieces if isinstance(p, PlannedChunk) and p.index == piece.index)

    def streams(self) -> list:
        return list(self.chunk_streams)

    def ended(self) -> bool:
        return (self.text_closed or self.stopped) and all(s.ended for s in self.streams())

    def cancel(self) -> None:
        self.stopped = True
        for s in self.streams():
            s.cancel()
        self.notify()


class LiveTake:
    """write(delta) as the text comes, close() at its end; iterate for the take's audio (its
    ChunkedTake's), cancel() to stop within a frame; `result` and `takes` once it has ended;
    `composition` and `one_prompt` once its text has."""

    def __init__(self, host: "TakeHost", request: Request, decode_every: int):
        """`request`: the voice, sampling, lexicon, join, budget and pauses of the whole text, and its
        text so far; `request.hold_ms`: speech starts once the text written holds that much reading
        (one token a frame) or the text ends: a writer slower than the model reads (12.5 tokens a
        second) is then waited for less often, at the cost of first audio that much later. The codes
        and audio are the same."""
        request = replace(request, sampling=request.sampling or SamplingParams.from_model(host.info))
        request.validate()
        if request.plan != AUTO or request.chunk_seeds:
            raise ValueError("a live take is planned as its text is written: plan must be auto, with no chunk seeds")
        self._host, self._sampling, self._decode_every = host, request.sampling, decode_every
        self._hold_tokens = request.hold_ms / 1000 * host.info.frame_rate
        # the request checked now (speaker, voice, language), not at the first word
        host.prompts.build("", speaker=request.speaker, language=request.language, instruct=request.instruct,
                           voice=request.voice, streaming_text=True, first_ids=[host.prompts.text["tts_eos"]])
        # (the text is planned again at every delta: its pieces counted once)
        self._compose_args = compose_args(host, request, lru_cache(maxsize=4096)(host.count_text_tokens))
        self._join = request.join or JoinSettings()
        self._text = ""
        self._unplanned = False        # text written since the last plan (gathered)
        self._gatherer: threading.Thread | None = None   # plans it when the model runs low
        self._failure: BaseException | None = None       # what planning gathered text raised
        self._pieces = _LivePieces()
        self._settled = 0              # how many pieces no later text can change
        self._lock = threading.Lock()  # (the writer's side)
        self.composition = None        # the whole text's plan, once it has ended
        self.one_prompt = False        # it was one prompt (long_text.one_prompt_text), once it has ended
        self._take = ChunkedTake(host.info, self._pieces, self._join)
        if request.text:
            self.write(request.text)

    # ---- the writer's side ---------------------------------------------------------------------
    def write(self, delta: str) -> None:
        """More text. ValueError (a MarkupError names line and column) for markup that is wrong, in
        this delta or in gathered ones."""
        with self._lock:
            failure, self._failure = self._failure, None
            if failure is not None:
                raise failure
            if self._pieces.text_closed:
                raise ValueError("the text is closed: start a new one for the next turn")
            if not self._text:
                delta = delta.lstrip()
                if not delta:
                    return
                self._take.start = time.perf_counter()   # (time to first audio counts from the first text)
            self._text += delta
            if self.unread_tokens() >= GATHER_WHILE_UNREAD:
                self._gather()
            else:
                self._plan_written()

    def close(self) -> None:
        """The end of the text: the rest is planned and spoken. ValueError for an empty text or
        markup that is wrong (what was spoken of it stops)."""
        with self._lock:
            if self._pieces.text_closed:
                return
            self._pieces.text_closed = True
            try:
                if not self._text.strip():
                    raise ValueError("text is empty")
                self._finish_plan(compose(self._text, **self._compose_args))
            except BaseException:
                self.cancel()
                raise
            finally:
                self._pieces.notify()

    @property
    def text(self) -> str:
        return self._text

    @property
    def streams(self) -> list[OpenPromptStream]:
        """Its chunks' streams begun so far, in order (none while it holds: Request.hold_ms)."""
        return self._pieces.streams()

    def unread_tokens(self) -> int:
        """Text tokens of the chunk being written that the model has and has not read yet (one a
        frame): while there are GATHER_WHILE_UNREAD, write() gathers the next deltas."""
        stream = self._pieces.last_stream()
        return 0 if stream is None else stream.unread()

    def _plan_written(self) -> None:
        self._unplanned = False
        self._advance(compose_open(self._text, **self._compose_args))

    def _gather(self) -> None:
        """The text written is planned once the model runs low (the caller holds the writer's lock)."""
        self._unplanned = True
        if self._gatherer is None:
            self._gatherer = threading.Thread(target=self._plan_when_low, daemon=True, name="kazeia-live-take")
            self._gatherer.start()

    def _plan_when_low(self) -> None:
        while True:
            time.sleep(_GATHER_POLL_S)
            with self._lock:
                if not self._unplanned or self._pieces.text_closed or self._pieces.stopped:
                    self._gatherer = None
                    return
                if self.unread_tokens() < GATHER_WHILE_UNREAD:
                    try:
                        self._plan_written()
                    except BaseException as e:   # (said at the next write; close plans the whole text again)
                        self._failure = e
                    self._gatherer = None
                    return

    # ---- the listener's side (its ChunkedTake's) -------------------------------------------------
    def __iter__(self) -> "LiveTake":
        return self

    def __next__(self) -> Chunk:
        return next(self._take)

    def cancel(self) -> None:
        self._take.cancel()

    def wait(self, timeout: float | None = None) -> Result | None:
        return self._take.wait(timeout)

    @property
    def result(self) -> Result | None:
        return self._take.result

    @property
    def error(self) -> BaseException | None:
        return self._take.error

    @property
    def takes(self) -> list:
        return self._take.takes

    @property
    def ended(self) -> bool:
        return self._take.ended

    def join(self, timeout: float | None = None) -> bool:
        return self._take.join(timeout)

    def __enter__(self) -> "LiveTake":
        return self

    def __exit__(self, *exc) -> None:
        self._take.__exit__(*exc)

    # ---- planning --------------------------------------------------------------------------------
    def _advance(self, plan: OpenPlan) -> None:
        held = self._compose_args["count_tokens"](self._text.strip()) < self._hold_tokens
        if not self._pieces.chunk_streams and held:
            return   # (held: nothing is spoken before that much text is written)
        chunks_settled = sum(isinstance(p, PlannedChunk) for p in plan.settled)
        maybe_one_prompt = chunks_settled <= 1 and (plan.open_chunk is None or plan.open_chunk.index == 0) and \
            not self._join.trim_silence   # (trimmed: never one prompt, long_text.one_prompt_text)
        for position in range(self._settled, len(plan.settled)):
            piece = plan.settled[position]
            if isinstance(piece, PlannedChunk) and maybe_one_prompt:
                break   # (the first chunk stays open while the text may yet be one prompt, the text as written)
            if position < len(self._pieces.pieces):
                if isinstance(piece, PlannedChunk):
                    self._close_chunk(position, piece, piece.text)
            else:
                self._add(piece)
                if isinstance(piece, PlannedChunk):
                    self._pieces.chunk_streams[-1].close(piece.text)
            self._settled = position + 1
        chunk, known, ahead = plan.open_chunk, None, plan.ahead
        if chunk is not None:
            known = chunk.text
        elif maybe_one_prompt and plan.settled:
            chunk, known, ahead = plan.settled[0], plan.settled[0].text, ""
        done = sum(isinstance(p, PlannedChunk) for p in self._pieces.pieces[:self._settled])
        if chunk is None or not done <= chunk.index <= len(self._pieces.chunk_streams):   # (none, or a stale view)
            return self._pieces.notify()
        if maybe_one_prompt:   # (what the chunk's words and the text as written agree on)
            written = self._text
            agreed = commonprefix([known, written])
            ahead = commonprefix([known[len(agreed):] + ahead, written[len(agreed):]])
            known = agreed
        if chunk.index == len(self._pieces.chunk_streams):
            if plan.pause_before and chunk.index > 0:
                self._add(plan.pause_before)
            self._add(chunk)
        stream = self._pieces.chunk_streams[chunk.index]
        if known.startswith(self._pieces.known[chunk.index]):
            self._pieces.known[chunk.index] = known
            stream.offer(known, ahead)
        self._pieces.notify()

    def _finish_plan(self, plan) -> None:
        """The whole text's plan: the chunks still open closed with their words, the rest begun."""
        prompt = one_prompt_text(self._text, plan, self._join)
        texts = [prompt] if prompt is not None else [c.text for c in plan.chunks]
        for position, piece in enumerate(plan.pieces):
            if position < len(self._pieces.pieces):
                had, is_chunk = self._pieces.pieces[position], isinstance(piece, PlannedChunk)
                if is_chunk != isinstance(had, PlannedChunk) or (not is_chunk and piece != had) or \
                        (is_chunk and not texts[piece.index].startswith(self._pieces.known[piece.index])):
                    raise RuntimeError(f"the live take went astray from the whole text's plan at piece {position}: "
                                       f"{had!r} against {piece!r}")
                if isinstance(piece, PlannedChunk) and position >= self._settled:
                    self._close_chunk(position, piece, texts[piece.index])
            else:
                self._add(piece)
                if isinstance(piece, PlannedChunk):
                    self._pieces.chunk_streams[-1].close(texts[piece.index])
        self._settled = len(plan.pieces)
        self.composition, self.one_prompt = plan, prompt is not None
        self._take.composition = plan

    def _add(self, piece) -> None:
        stream = None
        if isinstance(piece, PlannedChunk):
            before = self._pieces.last_stream()
            stream = OpenPromptStream(self._host, speaker=piece.cast.speaker, language=piece.language,
                                      instruct=piece.cast.instruct, voice=piece.cast.voice,
                                      sampling=replace(self._sampling, seed=piece.seed),
                                      decode_every=self._decode_every, after=before)
        self._pieces.add(piece, stream)

    def _close_chunk(self, position: int, piece: PlannedChunk, text: str) -> None:
        self._pieces.pieces[position] = piece
        self._pieces.chunk_streams[piece.index].close(text)
