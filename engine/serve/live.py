"""Live speech for the server's sockets (Kazeia's own, the Deepgram-style one, Wyoming's streamed
text): a connection speaks in turns, and each turn is a take of text that arrives while it is
spoken (Engine.open_take with text_open): one utterance while the text is one prompt, else the
chunks the long-text front end plans, each a session of the engine's batcher that waits, stepping
nothing, whenever it has read all its text so far. A turn's audio equals the whole text's as
POST /v1/audio/speech makes it with streaming text (markup and the server's lexicon included), bit
for bit. `Turns` is what every protocol shares: the text of the open turn, flush
(the turn's text ends; its audio goes on, and the next text opens the next turn), cancel (every turn
in flight stops within a frame), each turn admitted like one HTTP request and logged as one, its
audio sent in turn order through the protocol's `TurnSink`."""
from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable, Protocol

import anyio
import numpy as np

from .job import SpeechJob

if TYPE_CHECKING:
    from ..synthesis.requests import SamplingParams
    from ..synthesis.engine import Engine
    from .settings import ServerSettings
    from .voices import NamedVoice


@dataclass
class LiveJob(SpeechJob):
    """A SpeechJob whose text is written while it is spoken: `start`, `write` deltas, `close`.
    `hold_ms`: speech starts once the text holds that much reading (StreamedTake)."""
    cancelled: bool = False
    hold_ms: float = 0.0

    def start(self) -> None:
        self._stream = self.engine.open_take(self.request("", hold_ms=self.hold_ms), text_open=True)

    def write(self, delta: str) -> None:
        self._stream.write(delta)
        self.text = self._stream.text

    def close(self) -> None:
        self._stream.close()

    def cancel(self) -> None:
        self.cancelled = True
        super().cancel()


class TurnSink(Protocol):
    """How a protocol sends a connection's turns (the calls for one turn come in this order)."""
    async def start(self, turn: int) -> None: ...
    async def audio(self, turn: int, audio: np.ndarray) -> None: ...
    async def end(self, turn: int, outcome: str, job: LiveJob) -> None: ...   # ok, cancelled, timeout, error
    async def error(self, code: str, message: str) -> None: ...   # a refused turn or text; the connection goes on


@dataclass
class LiveService:
    """What every connection shares: the server's engine, limits and its per-request bookkeeping."""
    engine: "Engine"
    admission: object          # state.Admission (enter, leave, full, limit)
    settings: "ServerSettings"
    finish: Callable[[SpeechJob, str, str], None]   # the request's log line, metrics, admission.leave
    rejected: Callable[[], None]                    # counts a turn refused for a full server
    lexicon: object = None                          # the server's pronunciation rules (text.lexicon.Lexicon)


@dataclass
class _Turn:
    number: int
    job: LiveJob | None   # None: refused (the client was told); its text is dropped until the flush
    rid: str = ""
    pump: asyncio.Task | None = None
    pending: str = ""                   # text received, not yet given to the job: the next write's
    writer: asyncio.Task | None = None  # giving `pending` to the job
    chars: int = 0                      # the turn's text so far, received (ServerSettings.max_turn_chars)


class Turns:
    def __init__(self, service: LiveService, voice: "NamedVoice", language: str | None, instruct: str | None,
                 sampling: "SamplingParams", sink: TurnSink, prefix: str = "live", hold_ms: float = 0.0):
        self._service, self._sink, self._prefix, self._hold_ms = service, sink, prefix, hold_ms
        self._voice, self._language, self._instruct, self._sampling = voice, language, instruct, sampling
        self._open: _Turn | None = None          # the turn whose text is still being written
        self._in_flight: list[_Turn] = []        # turns whose audio is not all sent (in order)
        self._count = 0
        self.last_activity = time.monotonic()    # (a message in or audio out: the idle limit's clock)

    @property
    def open_turn(self) -> bool:
        return self._open is not None

    async def write(self, text: str) -> None:
        self.last_activity = time.monotonic()
        if not text:
            return
        if self._open is None:
            self._open = await self._start_turn()
        turn = self._open
        if turn.job is None:
            return
        limit = self._service.settings.max_turn_chars
        turn.chars += len(text)
        if turn.chars > limit:   # (each write plans the whole text again)
            turn.pending = ""
            await self._refuse(turn, "text_too_long", f"text: a turn holds at most {limit:,} characters; this "
                                                      "turn stops here (flush, then send the rest as the next)")
            return
        # one write at a time per turn: what arrives meanwhile goes in the next (the engine's live take
        # gathers deltas while the model has text to read; any split gives the same audio)
        turn.pending += text
        if turn.writer is None or turn.writer.done():
            turn.writer = asyncio.create_task(self._write_pending(turn))

    async def _write_pending(self, turn: _Turn) -> None:
        job = turn.job
        while turn.pending and turn.job is not None:
            text, turn.pending = turn.pending, ""
            try:
                await anyio.to_thread.run_sync(job.write, text)
            except Exception as e:   # (markup that is wrong; anything else stops the turn, not the socket)
                turn.pending = ""
                await self._refuse(turn, "invalid_text", str(e) if isinstance(e, ValueError) else
                                   f"the turn failed: {type(e).__name__}")

    async def _stop_writing(self) -> None:
        """Text not yet written is dropped, and the write in flight ends (a job is cancelled only
        once no write can add to it)."""
        for turn in self._in_flight:
            turn.pending = ""
        for turn in self._in_flight:
            await self._written(turn)

    @staticmethod
    async def _written(turn: _Turn) -> None:
        """Until the text received for `turn` is with its job."""
        await _ended([turn.writer])

    async def flush(self) -> int | None:
        """The open turn's text ends (its audio goes on); its number, or None if none was open."""
        self.last_activity = time.monotonic()
        turn, self._open = self._open, None
        if turn is None:
            return None
        await self._written(turn)
        if turn.job is not None:
            try:
                await anyio.to_thread.run_sync(turn.job.close)
            except ValueError as e:   # (only spaces: nothing to say)
                await self._refuse(turn, "invalid_text", str(e))
        return turn.number

    async def cancel(self) -> int:
        """Every turn in flight stops within a frame, unsent audio dropped; how many were stopped."""
        self.last_activity = time.monotonic()
        self._open = None
        stopped = 0
        await self._stop_writing()
        for turn in self._in_flight:
            if turn.job is not None and turn.pump is not None and not turn.pump.done():
                turn.job.cancel()
                stopped += 1
        await self.drain()
        return stopped

    async def drain(self) -> None:
        """Waits until every turn's audio is sent (a turn still open is flushed first)."""
        await self.flush()
        await _ended([turn.pump for turn in self._in_flight])

    async def abandon(self) -> None:
        """The client went away: every turn is cancelled and its slot freed."""
        self._open = None
        await self._stop_writing()
        for turn in self._in_flight:
            if turn.job is not None:
                turn.job.cancel()
        await _ended([turn.pump for turn in self._in_flight])

    async def _start_turn(self) -> _Turn:
        self._count += 1
        turn = _Turn(self._count, None, f"{self._prefix}-{uuid.uuid4().hex[:12]}")
        service = self._service
        if not service.admission.enter():
            service.rejected()
            await self._sink.error("server_busy", f"{service.admission.full().message}: this turn is not spoken")
            return turn
        job = LiveJob(service.engine, "", self._voice, self._language, self._instruct, self._sampling,
                      lexicon=service.lexicon, hold_ms=self._hold_ms)
        try:
            await anyio.to_thread.run_sync(job.start)
        except ValueError as e:   # (a language or instruction the model refuses)
            service.finish(job, turn.rid, "invalid")
            await self._sink.error("invalid_request", str(e))
            return turn
        except BaseException:
            job.cancel()
            service.finish(job, turn.rid, "error")
            raise
        turn.job = job
        previous = self._in_flight[-1].pump if self._in_flight else None
        self._in_flight = [t for t in self._in_flight if t.pump is not None and not t.pump.done()]
        self._in_flight.append(turn)
        turn.pump = asyncio.create_task(self._pump(turn, job, previous))
        return turn

    async def _refuse(self, turn: _Turn, code: str, message: str) -> None:
        """The turn stops (its pump ends it); the rest of its text is dropped until the flush, so one
        refusal is said once, not at every later write."""
        if turn.job is not None:
            turn.job.cancel()
            turn.job = None
        await self._sink.error(code, message)

    async def _pump(self, turn: _Turn, job: LiveJob, previous: asyncio.Task | None) -> None:
        """The turn's audio, after the turn before it has sent all of its own."""
        service, outcome = self._service, "error"
        limit = service.settings.request_timeout_s
        # the time limit holds while the turn waits too (for text that never comes, for the turn
        # before it): the job is cancelled then, and its wait for audio ends within a frame
        timed_out = False

        def time_up() -> None:
            nonlocal timed_out
            timed_out = True
            job.cancel()
        deadline = asyncio.get_running_loop().call_later(max(0.0, limit - (time.perf_counter() - job.started)),
                                                         time_up)
        try:
            if previous is not None:
                await _ended([previous])
            await self._sink.start(turn.number)
            while (audio := await anyio.to_thread.run_sync(job.next_audio)) is not None:
                await self._sink.audio(turn.number, audio)
                self.last_activity = time.monotonic()
                if time.perf_counter() - job.started > limit:
                    time_up()
                    break
            if timed_out:
                await self._sink.error("timeout", f"turn {turn.number} ran over its time limit ({limit:g} s)")
                outcome = "timeout"
            else:
                outcome = "cancelled" if job.cancelled else "ok"
        except Exception:   # (the client went away mid-send: its socket refuses)
            outcome = "disconnected"
        finally:
            deadline.cancel()
            job.cancel()
            service.finish(job, turn.rid, outcome)
        if outcome != "disconnected":
            try:
                await self._sink.end(turn.number, outcome, job)
            except Exception:
                pass


async def _ended(tasks: list) -> None:
    """Until every task has ended, whatever its end (awaiting them directly would carry a
    cancellation of the waiter into them, and their errors out: each handles its own)."""
    tasks = [t for t in tasks if t is not None]
    if tasks:
        await asyncio.wait(tasks)


async def run_idle_watch(turns: Turns, idle_s: float, on_idle: Callable[[], Awaitable[None]]) -> None:
    """Calls `on_idle` once when a turn is open and no message came and no audio went for `idle_s`
    seconds (the writer stalled mid-answer). Between turns a socket may rest as long as it likes, as
    an agent's pooled connection does while its user speaks; WebSocket pings close dead ones."""
    while True:
        await asyncio.sleep(min(1.0, idle_s / 4))
        if not turns.open_turn:
            turns.last_activity = time.monotonic()
        if time.monotonic() - turns.last_activity >= idle_s:
            await on_idle()
            return
