"""The text of a take spoken as it is typed, from the GUI thread to the take's stream; Qt-free."""
from __future__ import annotations

import threading


class TypedText:
    """The text of a take spoken as it is typed, from the GUI thread to the take's stream: kept until
    the stream exists (the job may still wait for the worker), then handed on. Writing only tokenizes
    the text (microseconds); the engine's work stays on its threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._closed = False
        self._stream = None
        self.error: str | None = None   # why the text was refused (over the one-utterance limit)

    def write(self, delta: str) -> None:
        with self._lock:
            if self._closed or self.error:
                return
            if self._stream is None:
                self._pending.append(delta)
                return
            self._write(delta)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._stream is not None:
                self._close()

    def attach(self, stream) -> None:
        with self._lock:
            self._stream = stream
            for delta in self._pending:
                self._write(delta)
            self._pending.clear()
            if self._closed:
                self._close()

    def _write(self, delta: str) -> None:
        try:
            self._stream.write(delta)
        except ValueError as e:
            self.error = str(e)
            self._stream.cancel()

    def _close(self) -> None:
        try:
            self._stream.close()
        except ValueError as e:   # (nothing but spaces was typed)
            self.error = str(e)
