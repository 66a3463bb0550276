"""The speech decoder beside generation. While the talker and code predictor make frame n+1, one
thread of the engine's own decodes the frames made so far on a second thread pool, so generation
(which waits on memory) and decoding (which waits on arithmetic) share the cores instead of taking
turns. The audio is the sequential run's bit for bit: a decoder session's output does not depend on
how frames are grouped into pushes, nor on how many threads a launch uses (tests/engine/test_overlap.py)."""
from __future__ import annotations

import os
import queue
import threading
from typing import Callable


class DecoderWorker:
    """Runs decoding jobs in the order they are handed in, on a thread of its own (started on demand,
    ended when idle). One per engine: every overlapped stream's pushes go through it, so the
    sessions that share the decoder pool's compute never push at the same time."""

    def __init__(self, pool):
        self.pool = pool   # the decoder's thread pool (its `active` is the thread policy's to set)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._queued = 0

    @property
    def busy(self) -> bool:
        """Jobs handed in and not yet done."""
        return self._queued > 0

    def submit(self, job: Callable[[], None]) -> None:
        """`job` runs on the worker after every job handed in before it. A job catches its own
        errors (they belong to its stream, not to the worker)."""
        with self._lock:
            self._queued += 1
            self._jobs.put(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name="kazeia-decoder")
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._queued == 0:
                    self._thread = None
                    return
            job = self._jobs.get()
            try:
                job()
            finally:
                with self._lock:
                    self._queued -= 1


def decoder_threads(active: int) -> int:
    """Threads of `active` the decoder gets while generation runs beside it: half (generation, bound
    by memory, loses less than half its speed when it gives up half the cores; decoding scales with
    them), at least one, and at least one left for generation."""
    return max(1, active // 2)


def default_overlap() -> bool:
    """$KAZEIA_OVERLAP: 1 (decode beside generation) or 0 (take turns, the default)."""
    value = os.environ.get("KAZEIA_OVERLAP", "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ValueError(f"KAZEIA_OVERLAP={value!r}: 1 (decode beside generation) or 0 (take turns)")
