"""One prompt's audio as its frames are made (PromptStream), and the prompt itself: a request built
into one prompt and checked (build_prompt) and started as a stream (open_prompt). Frames come from a
runner (the stream's own thread or the engine's batch worker) through the runner's side of the
stream: `open_session`, `on_frame`, `finish`, `fail`; the consumer iterates the chunks, cancels, or
waits for the result."""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator, Protocol

import numpy as np

from .requests import MAX_TEXT_TOKENS, Chunk, Request, Result, SamplingParams, Timings

if TYPE_CHECKING:
    from .host import TakeHost
    from .prompt import PromptPlan, Voice

DECODE_EVERY = 4           # frames per streaming decoder launch after the first (320 ms of audio)
_DONE = object()


def build_prompt(host: "TakeHost", request: Request) -> "PromptPlan":
    """`request`'s text, as written, built into one prompt (its sampling given) and checked:
    ValueError names what the model refuses (speaker, voice, language, an empty text, a text too long
    for one prompt, prompt and frame limit beyond the model's positions)."""
    plan = host.prompts.build(request.text, speaker=request.speaker, language=request.language,
                              instruct=request.instruct, voice=request.voice, streaming_text=request.streaming_text)
    if plan.body_tokens > MAX_TEXT_TOKENS:
        raise ValueError(f"text too long: {plan.body_tokens} tokens in one request (at most {MAX_TEXT_TOKENS}, "
                         "several minutes of speech); the engine's plan can split a text of any length into "
                         "chunks unless asked for one prompt")
    positions = len(plan) + host.max_frames_for(plan, request.sampling) + 1
    limit = host.info.hparams["talker"]["max_position_embeddings"]
    if positions > limit:
        raise ValueError(f"prompt and frame limit need {positions} positions; the model handles "
                         f"{limit}: shorten the text or max_frames")
    return plan


def open_prompt(host: "TakeHost", request: Request, batcher: "StreamRunner | None" = None,
                decode_every: int = DECODE_EVERY, follows: bool = False) -> "PromptStream":
    """`request` (its sampling given) as one prompt's stream, started: on `batcher`, else on a thread
    of its own; `follows`: a later chunk of a take (PromptStream.follows)."""
    start = time.perf_counter()
    plan = build_prompt(host, request)
    timings = Timings(tokenize_ms=1000 * (time.perf_counter() - start), frame_seconds=1 / host.info.frame_rate)
    return PromptStream(host, plan, request.sampling, timings, start, icl_codes(request.voice), decode_every,
                        batcher=batcher, follows=follows)


def icl_codes(voice: "Voice | None") -> np.ndarray | None:
    """The reference codes an in-context voice's decoder hears first (None for any other voice)."""
    if voice is None or voice.ref_codes is None:
        return None
    return np.asarray(voice.ref_codes, np.int32)


class StreamRunner(Protocol):
    """Runs streams given it, frame by frame, through their runner's side (batch.Batcher)."""

    def submit(self, stream: "PromptStream") -> None: ...


class PromptStream:
    """Iterator of Chunk: one prompt's audio as its frames are made. Generation runs on a worker
    thread with the GIL released: its own, or a batch worker (Engine(max_batch=N): several streams
    advance together)."""

    def __init__(self, host: "TakeHost", plan: "PromptPlan", sampling: SamplingParams, timings: Timings,
                 start: float, prime_codes: np.ndarray | None = None, decode_every: int = 1,
                 batcher: StreamRunner | None = None, feed=None, follows: bool = False,
                 after: "PromptStream | None" = None):
        self._host = host
        self.feed = feed   # batch.TextFeed: the text is still being written (only through a batcher)
        # a later chunk of a take: its audio is needed only once the chunk before it has played, so a
        # batcher with no free slot lets a take's first chunk (a listener waiting for first audio) go first
        self.follows = follows
        # the chunk before this one in a live take: this one is made once that one is (two chunks of
        # one listener's take side by side each go slower, and on a small machine slower than real time)
        self.after = after
        self._plan, self._sampling = plan, sampling
        self._queue: queue.Queue = queue.Queue()
        self._cancel = threading.Event()
        self._ended = threading.Event()
        self._timings = timings
        self._start = start
        self._codes: list[np.ndarray] = []
        self._pending: list[np.ndarray] = []   # generated, not yet decoded
        self._decode_every = decode_every
        self._audio: list[np.ndarray] = []
        self.result: Result | None = None
        self.error: BaseException | None = None
        # overlapped (engine/synthesis/overlap.py): pushed by the host's decoder worker, on its pool; else
        # pushed under the host's lock by the thread that makes the frames
        self._worker = host.overlap_worker
        decoder = host.decoder if self._worker is None else host.beside_decoder
        self._decoder = decoder.session(share_compute=True)
        self._handed = threading.Lock()   # the pending frames, between generation and the worker
        self._queued = False              # a worker job for this stream is waiting to run
        self._decoded = threading.Condition(self._handed)
        self._frames_decoded = 0
        self._ending = False              # generation has ended: every frame left is decoded
        self._decode_error: BaseException | None = None
        # in-context cloning: the decoder hears the reference codes first (their audio is dropped;
        # the reference cuts int(ref / total * samples), which can keep one more sample: see docs/speaking.md)
        self._prime_codes = prime_codes
        self.prime_audio: np.ndarray | None = None   # theirs, decoded (whole_prompt cuts as offline)
        self._thread: threading.Thread | None = None
        if batcher is not None:
            batcher.submit(self)
        else:
            self._thread = threading.Thread(target=self._run, daemon=True, name="kazeia-synthesis")
            self._thread.start()

    # -- the runner's side (the caller holds the host's lock) ----------------------------------
    def open_session(self):
        """A native session for this request, prefilled (for the batch worker)."""
        self._begin()
        return self._host.open_session(self._plan, self._sampling, text_open=self.feed is not None)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def frames_seen(self) -> int:
        return len(self._codes)

    def on_frame(self, index: int, codes: np.ndarray, talker_ms: float, cp_ms: float,
                 prefill_ms: float | None) -> bool:
        """Frame `index` is made; False: the consumer has cancelled, stop."""
        if self._cancel.is_set():
            return False
        t = self._timings
        if prefill_ms is not None:
            t.prefill_ms = prefill_ms
        self._host.thread_policy.observe(talker_ms + cp_ms)
        t.talker_ms.append(talker_ms)
        t.code_predictor_ms.append(cp_ms)
        t.frames = index + 1
        self._codes.append(codes.copy())
        if self._worker is not None:   # False: a push failed (finish raises it)
            return self._hand_over(self._codes[-1], first=index == 0)
        self._pending.append(self._codes[-1])
        if index == 0 or len(self._pending) >= self._decode_every:
            self._decode_pending()
        return True

    def waiting_for_text(self) -> None:
        """Generation waits for text still being written: the frames made so far are decoded now, not
        when `decode_every` have gathered (the listener hears all there is while the writer thinks)."""
        if self._worker is not None:
            self._request_turn(1)
        elif self._pending:
            self._decode_pending()

    def finish(self, out: dict, cancelled: bool = False) -> None:
        """Generation has ended: the last frames are decoded and the result is set."""
        try:
            codes = out["codes"]
            reason = "cancelled" if cancelled else out["stop_reason"]
            if self._worker is not None:
                codes = self._drain(codes, drop=reason == "cancelled")
            elif reason == "cancelled":   # stop now: frames not yet heard are dropped
                codes = codes[:len(self._codes) - len(self._pending)]
                self._pending.clear()
            else:
                self._decode_pending()
            self._release_decoder()
            t = self._timings
            t.prefill_ms = float(out["prefill_ms"])
            t.frames = len(codes)
            del t.talker_ms[len(codes):], t.code_predictor_ms[len(codes):]
            t.total_ms = 1000 * (time.perf_counter() - self._start)
            audio = np.concatenate(self._audio) if self._audio else np.zeros(0, np.float32)
            self.result = Result(audio, self._host.info.sample_rate, codes, t, reason, self._host.report_held())
        except BaseException as e:
            self.error = e
        self._end()

    def fail(self, error: BaseException) -> None:
        self.error = error   # the decoder session is not reused: a push may have failed half-way
        if self._worker is not None:   # the worker ends this stream's pushes before the consumer hears
            with self._handed:
                self._pending.clear()
                self._decoded.wait_for(lambda: not self._queued)
        self._end()

    # -- inside ---------------------------------------------------------------------------------
    def _begin(self) -> None:
        self._host.thread_policy.restart()
        if self._prime_codes is not None and self._worker is None:   # (overlapped: the worker's first turn)
            self.prime_audio = self._decoder.push(self._prime_codes)

    def _decode_pending(self) -> None:
        if not self._pending:
            return
        n, first = len(self._pending), len(self._codes) - len(self._pending)
        t0 = time.perf_counter()
        audio = self._decoder.push(np.stack(self._pending))
        self._pending.clear()
        self._publish(audio, first, n, t0)

    # overlapped: frames go to the decoder worker; each of its turns decodes all that wait
    def _hand_over(self, frame: np.ndarray, first: bool) -> bool:
        with self._handed:
            if self._decode_error is not None:
                return False
            self._pending.append(frame)
        # a turn for the first frame alone, then for `decode_every` at a time (fewer frames per
        # launch read the decoder's weights more often per frame); more when the worker falls behind
        self._request_turn(1 if first else self._decode_every)
        if first:   # time to first audio as when taking turns: generation waits, the decoder has every core
            self._wait_decoded(1)
        return self._decode_error is None

    def _request_turn(self, at_least: int) -> None:
        """A worker turn for this stream if none is queued and `at_least` frames wait."""
        with self._handed:
            if self._queued or len(self._pending) < at_least or self._decode_error is not None:
                return
            self._queued = True
        self._worker.submit(self._decode_turn)

    def _decode_turn(self) -> None:
        with self._handed:
            frames, self._pending = self._pending, []
        try:
            if self._prime_codes is not None and self.prime_audio is None:
                self.prime_audio = self._decoder.push(self._prime_codes)
            if frames:
                first, t0 = self._frames_decoded, time.perf_counter()
                audio = self._decoder.push(np.stack(frames))
                self._publish(audio, first, len(frames), t0)
        except BaseException as e:   # raised in the generating thread at its next frame or at the end
            with self._handed:
                self._decode_error = e
        with self._handed:
            self._frames_decoded += len(frames)
            self._queued = False
            self._decoded.notify_all()
        self._request_turn(1 if self._ending else self._decode_every)   # frames made meanwhile
        self._host.thread_policy.observe()   # cores back to generation if nothing waits

    def _wait_decoded(self, frames: int) -> None:
        policy = self._host.thread_policy
        policy.generation_waits(True)
        try:
            with self._handed:
                self._decoded.wait_for(lambda: self._frames_decoded >= frames or self._decode_error is not None)
        finally:
            policy.generation_waits(False)

    def _drain(self, codes: np.ndarray, drop: bool) -> np.ndarray:
        """Generation has ended: the worker decodes what waits (cancelled: only what it has taken);
        the codes heard."""
        if drop:
            with self._handed:
                self._pending.clear()
        else:
            self._ending = True   # (a turn in flight asks for one more, however few frames wait)
            self._request_turn(1)
        self._wait_decoded(len(self._codes) if not drop else 0)
        with self._handed:
            self._decoded.wait_for(lambda: not self._queued)
            if self._decode_error is not None:
                raise self._decode_error
            return codes[:self._frames_decoded]

    def _publish(self, audio: np.ndarray, first: int, n: int, t0: float) -> None:
        t = self._timings
        t.decoder_ms.extend([1000 * (time.perf_counter() - t0) / n] * n)   # the launch's cost, shared
        if first == 0:
            t.ttfa_ms = 1000 * (time.perf_counter() - self._start)
        t.total_ms = 1000 * (time.perf_counter() - self._start)
        self._audio.append(audio)
        self._queue.put(Chunk(audio, first, n, replace(t, talker_ms=list(t.talker_ms),
                                                       code_predictor_ms=list(t.code_predictor_ms),
                                                       decoder_ms=list(t.decoder_ms))))

    def _release_decoder(self) -> None:
        """Every push of this stream is done: the host's next stream may reuse its decoder session."""
        decoder, self._decoder = self._decoder, None
        if decoder is not None:
            decoder.release()

    def _end(self) -> None:
        self._ended.set()
        self._queue.put(_DONE)

    def _run(self) -> None:
        try:
            with self._host.lock:
                self._begin()
                self.finish(self._host.generate_frames(self._plan, self._sampling, self.on_frame))
        except BaseException as e:   # surfaced to the consumer by __next__
            self.fail(e)

    # -- the consumer's side --------------------------------------------------------------------
    def __iter__(self) -> Iterator[Chunk]:
        return self

    def __next__(self) -> Chunk:
        item = self._queue.get()
        if item is _DONE:
            self._queue.put(_DONE)
            if self.error is not None:
                raise self.error
            raise StopIteration
        return item

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def ended(self) -> bool:
        """Generation has ended (result or error is set)."""
        return self._ended.is_set()

    def join(self, timeout: float | None = None) -> bool:
        """Blocks until generation has ended (drains nothing, raises nothing); False on timeout."""
        return self._ended.wait(timeout)

    def wait(self, timeout: float | None = None) -> Result | None:
        """Blocks until generation has ended (drains nothing); returns the result."""
        self.join(timeout)
        if self.error is not None:
            raise self.error
        return self.result

    def __enter__(self) -> "PromptStream":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()
        self.join()
