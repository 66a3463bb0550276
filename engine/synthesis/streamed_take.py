"""A take of a text still being written (a language model's answer, an operator typing), planned as
it is written: text.open_plan says which chunks of the whole text's plan the text so far decides,
and how far into the next one; each chunk is spoken by a TextStream (engine/synthesis/text_stream.py) from
its first known words, on the engine's batcher, and the take's audio is the chunks joined with
their pauses (LongStream's assembler), in order, as they are heard.

Property: the codes and audio are those of Engine.take(the whole text, streaming_text=True), bit for
bit, whatever the split and timing of the deltas: one prompt when long_text.one_prompt_text says
the whole text is one, else its chunks, seeds and pauses. Until a second chunk is certain, the first
is fed only what the two agree on (the text as written, or its chunk's words). A text's leading
white space is not part of it (a turn often starts with the space before its first word)."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from functools import lru_cache
from os.path import commonprefix
from typing import TYPE_CHECKING, Iterator

from ..voices.cast import model_cast
from .long_text import LongStream, one_prompt_text
from .requests import SamplingParams
from ..text.compose import Cast, Pauses, PlannedChunk, compose
from ..text.join import JoinSettings, TakeAssembler
from ..text.open_plan import OpenPlan, compose_open
from ..text.sentences import Budget
from .text_stream import TextStream

if TYPE_CHECKING:
    from .prompt import Voice
# (the Engine is named in annotations only: synthesis.Engine.open_text_stream imports this module)


class StreamedTake(LongStream):
    """write(delta) as the text comes, close() at its end; iterate for the take's audio (as a
    LongStream), cancel() to stop within a frame; `result` once it has ended."""

    def __init__(self, engine: "Engine", *, speaker: str | None, language: str | None, instruct: str | None,
                 voice: "Voice | None", sampling: SamplingParams | None, decode_every: int, max_tokens: int,
                 lexicon=None, hold_ms: float = 0.0):
        """`hold_ms`: speech starts once the text written holds that much reading (one token a frame)
        or the text ends: a writer slower than the model reads (12.5 tokens a second) is then waited
        for less often, at the cost of first audio that much later. The codes and audio are the same."""
        if not 0 <= hold_ms <= 60_000:
            raise ValueError(f"hold_ms must be from 0 to 60000, got {hold_ms!r}")
        self._engine = engine
        self._hold_tokens = hold_ms / 1000 * engine.info.frame_rate
        self._sampling = sampling or SamplingParams.from_model(engine.info)
        self._sampling.validate()
        self._decode_every, self._max_tokens = decode_every, max_tokens
        # the request checked now (speaker, voice, language), not at the first word
        engine._prompts.build("", speaker=speaker, language=language, instruct=instruct, voice=voice,
                              streaming_text=True, first_ids=[engine._prompts.text["tts_eos"]])
        self._compose_args = dict(default=Cast(speaker=speaker, instruct=instruct, voice=voice),
                                  language=language or "auto", cast=model_cast(engine.model),
                                  languages=engine.info.languages, lexicon=lexicon, budget=Budget(), pauses=Pauses(),
                                  seed=self._sampling.seed,
                                  # (the text is planned again at every delta: its pieces counted once)
                                  count_tokens=lru_cache(maxsize=4096)(engine.count_text_tokens))
        self._text = ""
        self._pieces: list = []        # the take's pieces so far: PlannedChunk (final once settled), ms of silence
        self._settled = 0              # how many of them no later text can change
        self._streams: list[TextStream] = []   # one per chunk in _pieces, in order
        self._known: list[str] = []    # what each was offered
        self._text_closed = False
        self._lock = threading.Lock()  # (the writer's side)
        self._changed = threading.Condition()
        self.composition = None        # the whole text's plan, once it has ended
        self.one_prompt = False        # it was one prompt (long_text.one_prompt_text), once it has ended
        # as LongStream's
        self._join = JoinSettings()
        self._assembler = TakeAssembler(engine.info.sample_rate, self._join)
        self._start = time.perf_counter()
        self._cancelled = False
        self._fed: list = []
        self.result = None
        self.error: BaseException | None = None
        self.takes = []
        self._iterator = self._run()

    # ---- the writer's side ---------------------------------------------------------------------
    def write(self, delta: str) -> None:
        """More text. ValueError (a MarkupError names line and column) for markup that is wrong."""
        with self._lock:
            if self._text_closed:
                raise ValueError("the text is closed: start a new one for the next turn")
            if not self._text:
                delta = delta.lstrip()
                if not delta:
                    return
                self._start = time.perf_counter()   # (time to first audio counts from the first text)
            self._text += delta
            self._advance(compose_open(self._text, **self._compose_args))

    def close(self) -> None:
        """The end of the text: the rest is planned and spoken. ValueError for an empty text or
        markup that is wrong (what was spoken of it stops)."""
        with self._lock:
            if self._text_closed:
                return
            self._text_closed = True
            try:
                if not self._text.strip():
                    raise ValueError("text is empty")
                plan = compose(self._text, **self._compose_args)
                self._finish_plan(plan)
            except BaseException:
                self.cancel()
                raise
            finally:
                self._notify()

    @property
    def text(self) -> str:
        return self._text

    def unread_tokens(self) -> int:
        """Text tokens of the chunk being written that the model has and has not read yet (one a
        frame): a writer may gather its next deltas while there are enough (the audio is the same)."""
        with self._changed:
            stream = self._streams[-1] if self._streams else None
        return 0 if stream is None else stream.unread()

    def cancel(self) -> None:
        super().cancel()
        self._notify()

    # ---- planning --------------------------------------------------------------------------------
    def _advance(self, plan: OpenPlan) -> None:
        if not self._streams and self._compose_args["count_tokens"](self._text.strip()) < self._hold_tokens:
            return   # (held: nothing is spoken before that much text is written)
        chunks_settled = sum(isinstance(p, PlannedChunk) for p in plan.settled)
        maybe_one_prompt = chunks_settled <= 1 and (plan.open_chunk is None or plan.open_chunk.index == 0)
        for position in range(self._settled, len(plan.settled)):
            piece = plan.settled[position]
            if isinstance(piece, PlannedChunk) and maybe_one_prompt:
                break   # (the first chunk stays open while the text may yet be one prompt, the text as written)
            if position < len(self._pieces):
                if isinstance(piece, PlannedChunk):
                    self._close_chunk(position, piece, piece.text)
            else:
                self._add(piece)
                if isinstance(piece, PlannedChunk):
                    self._streams[-1].close(piece.text)
            self._settled = position + 1
        chunk, known, ahead = plan.open_chunk, None, plan.ahead
        if chunk is not None:
            known = chunk.text
        elif maybe_one_prompt and plan.settled:
            chunk, known, ahead = plan.settled[0], plan.settled[0].text, ""
        done = sum(isinstance(p, PlannedChunk) for p in self._pieces[:self._settled])
        if chunk is None or not done <= chunk.index <= len(self._streams):   # (none, or a stale view)
            return self._notify()
        if maybe_one_prompt:   # (what the chunk's words and the text as written agree on)
            written = self._text
            agreed = commonprefix([known, written])
            ahead = commonprefix([known[len(agreed):] + ahead, written[len(agreed):]])
            known = agreed
        if chunk.index == len(self._streams):
            if plan.pause_before and chunk.index > 0:
                self._add(plan.pause_before)
            self._add(chunk)
        stream = self._streams[chunk.index]
        if known.startswith(self._known[chunk.index]):
            self._known[chunk.index] = known
            stream.offer(known, ahead)
        self._notify()

    def _finish_plan(self, plan) -> None:
        """The whole text's plan: the chunks still open closed with their words, the rest begun."""
        prompt = one_prompt_text(self._text, plan)
        texts = [prompt] if prompt is not None else [c.text for c in plan.chunks]
        for position, piece in enumerate(plan.pieces):
            if position < len(self._pieces):
                had, is_chunk = self._pieces[position], isinstance(piece, PlannedChunk)
                if is_chunk != isinstance(had, PlannedChunk) or (not is_chunk and piece != had) or \
                        (is_chunk and not texts[piece.index].startswith(self._known[piece.index])):
                    raise RuntimeError(f"the live take went astray from the whole text's plan at piece {position}: "
                                       f"{had!r} against {piece!r}")
                if isinstance(piece, PlannedChunk) and position >= self._settled:
                    self._close_chunk(position, piece, texts[piece.index])
            else:
                self._add(piece)
                if isinstance(piece, PlannedChunk):
                    self._streams[-1].close(texts[piece.index])
        self._settled = len(plan.pieces)
        self.composition, self.one_prompt = plan, prompt is not None

    def _add(self, piece) -> None:
        with self._changed:
            self._pieces.append(piece)
            if isinstance(piece, PlannedChunk):
                self._streams.append(TextStream(
                    self._engine, speaker=piece.cast.speaker, language=piece.language, instruct=piece.cast.instruct,
                    voice=piece.cast.voice, sampling=replace(self._sampling, seed=piece.seed),
                    decode_every=self._decode_every, max_tokens=self._max_tokens,
                    after=self._streams[-1] if self._streams else None))
                self._known.append("")
            self._changed.notify_all()

    def _close_chunk(self, position: int, piece: PlannedChunk, text: str) -> None:
        self._pieces[position] = piece
        self._streams[piece.index].close(text)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    # ---- the listener's side (LongStream's loop) -------------------------------------------------
    def _in_order(self) -> Iterator[tuple[PlannedChunk | float, object]]:
        position, chunk = 0, 0
        while True:
            with self._changed:
                while position >= len(self._pieces) and not (self._text_closed or self._cancelled):
                    self._changed.wait()
                if position >= len(self._pieces):
                    return
                piece = self._pieces[position]
            if isinstance(piece, PlannedChunk):
                yield piece, self._streams[chunk]
                chunk += 1
            else:
                yield piece, None
            position += 1

    def _first_audio(self) -> None:
        pass

    def _planned(self, piece: PlannedChunk) -> PlannedChunk:
        return next(p for p in self._pieces if isinstance(p, PlannedChunk) and p.index == piece.index)
