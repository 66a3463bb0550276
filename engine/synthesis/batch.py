"""Many utterances through one engine at once: each is a native session (its own KV cache, random
stream and position) and every frame step advances all of them in one talker launch and one
code-predictor launch, so the weights are read once per step for the whole batch. Sessions join
(after their prefill) and leave (EOS, frame limit, cancel) at frame boundaries; a sequence's codes
depend only on its own request, never on what shares its steps. A session whose text is still being
written (TextFeed) gets its new text ids before each step and, when it has read all there is, waits:
it is not stepped (the frames it has made are decoded at once, not when a launch's worth has
gathered), and a batch of only such sessions sleeps until text or a cancel comes."""
from __future__ import annotations

import atexit
import threading
import weakref
from collections import deque
from typing import Protocol

import numpy as np


class BatchHost(Protocol):
    """What the batch worker needs of the engine (kazeia.engine.Engine)."""
    lock: threading.Lock   # held for each step: a placement or thread change waits for it

    def step(self, sessions: list) -> None: ...


class TextFeed:
    """The text ids of a stream whose text is still being written: the writer adds them (and the
    end), the batch worker hands them to the native session before each step."""

    def __init__(self, wake):
        self._lock = threading.Lock()
        self._ids: list[int] = []
        self._max_frames: int | None = None   # set by close: the whole text's frame limit
        self.closed = False
        self._wake = wake                     # tells the batch worker there is something to read

    def add(self, ids: list[int]) -> None:
        if ids:
            with self._lock:
                self._ids.extend(ids)
            self._wake()

    def close(self, max_frames: int) -> None:
        with self._lock:
            self._max_frames = max_frames
            self.closed = True
        self._wake()

    def hand_to(self, session) -> None:
        """New ids (and the end, once) into the native session (under the host's lock)."""
        with self._lock:
            ids, self._ids = self._ids, []
            closing, self._max_frames = self._max_frames, None
        if ids:
            session.append_text(np.asarray(ids, np.int32))
        if closing is not None:
            session.close_text(closing)


class Batcher:
    """The worker that steps every active session of an engine together (at most `max_batch`; the
    rest wait their turn in arrival order). Started on demand; it exits when nothing is left."""

    def __init__(self, host: BatchHost, max_batch: int):
        if not isinstance(max_batch, int) or max_batch < 1:
            raise ValueError(f"max_batch must be a positive integer, got {max_batch!r}")
        self.max_batch = max_batch
        self._host = host
        self._waiting: deque = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self.steps = 0            # frame steps run (for tests and the bench)
        self.largest_batch = 0
        _batchers.add(self)

    def stop(self, timeout: float) -> None:
        """Every session cancelled and the worker gone (within `timeout` seconds): the process is
        ending. A worker still inside a native step when the interpreter finalizes aborts the
        process as it wakes (a daemon thread cannot take the GIL back then)."""
        with self._cond:
            self._stopping = True
            thread = self._thread
            self._cond.notify()
        if thread is not None:
            thread.join(timeout)

    def wake(self) -> None:
        """A waiting session has new text (or was cancelled): step again."""
        with self._cond:
            self._cond.notify()

    def submit(self, stream) -> None:
        """`stream` (prompt_stream.PromptStream: its runner's side) run with the others, in turn."""
        with self._cond:
            self._waiting.append(stream)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="kazeia-batch")
                self._thread.start()
            self._cond.notify()

    def _admit(self, active: list, later_chunks: bool = True) -> list:
        """Waiting streams for the free slots, in arrival order: takes' first chunks, or if none waits
        (and `later_chunks`) later chunks (PromptStream.follows). A later chunk's audio is not needed
        yet, so its prefill waits for a step: a listener's first audio does not wait for it."""
        with self._cond:
            free = self.max_batch - len(active)
            joining = [s for s in self._waiting if not s.follows][:free]
            if not joining and later_chunks:
                joining = [s for s in self._waiting if s.follows and _may_start(s)][:free]
            for s in joining:
                self._waiting.remove(s)
            return joining

    def _run(self) -> None:
        active: list[tuple] = []   # (stream, native session)
        while True:
            joining = self._admit(active)
            with self._cond:
                if self._stopping:
                    for s in joining:
                        s.fail(RuntimeError("the process is ending"))
                    for s, n in active:
                        s.finish(n.result(), cancelled=True)
                    active, joining = [], []
                if not active and not joining:
                    self._thread = None
                    return
            with self._host.lock:
                # takes' first chunks that arrive during these prefills are prefilled too before the
                # next step: streams starting together then share their first frames' step instead of
                # each first step and first decode waiting on the one before
                while joining:
                    for stream in joining:
                        if stream.cancelled:   # (cancelled while it waited: nothing to prefill)
                            stream.finish(_NOTHING_MADE, cancelled=True)
                            continue
                        try:
                            active.append((stream, stream.open_session()))
                        except BaseException as e:   # a bad request fails alone
                            stream.fail(e)
                    joining = self._admit(active, later_chunks=False)
                live = [(s, n) for s, n in active if not s.cancelled]
                for s, n in active:
                    if s.cancelled:
                        s.finish(n.result(), cancelled=True)
                active = live
                if not active:
                    continue
                for s, n in active:
                    if s.feed is not None:
                        s.feed.hand_to(n)
                ready = []
                for s, n in active:
                    if n.waiting:
                        s.waiting_for_text()
                    else:
                        ready.append(n)
                self.largest_batch = max(self.largest_batch, len(ready))
                if not ready:   # every session waits for text: sleep until some comes (or a cancel)
                    with self._cond:
                        if not any(_may_start(s) for s in self._waiting):
                            self._cond.wait(0.05)
                    continue
                try:
                    self._host.step(ready)
                    self.steps += 1
                except BaseException as e:   # an engine failure ends every session of the step
                    for s, _ in active:
                        s.fail(e)
                    active = []
                    continue
                still = []
                for stream, session in active:
                    if session.n_frames > stream.frames_seen:
                        codes, talker_ms, cp_ms = session.frame(session.n_frames - 1)
                        prefill_ms = session.result()["prefill_ms"] if session.n_frames == 1 else None
                        if not stream.on_frame(session.n_frames - 1, codes, talker_ms, cp_ms, prefill_ms):
                            stream.finish(session.result(), cancelled=True)
                            continue
                    if session.done:
                        stream.finish(session.result())
                    else:
                        still.append((stream, session))
                active = still


_NOTHING_MADE = {"codes": np.zeros((0, 16), np.int32), "prefill_ms": 0.0, "stop_reason": "cancelled"}


def _may_start(stream) -> bool:
    """A waiting stream may join unless it is to be made after another that has not ended."""
    return stream.after is None or stream.after.ended


_batchers: "weakref.WeakSet[Batcher]" = weakref.WeakSet()


@atexit.register
def _stop_batchers() -> None:
    for batcher in list(_batchers):
        batcher.stop(timeout=30)
