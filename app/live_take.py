"""The take being generated, as the window shows and plays it. Per chunk only copies (into the take
view and, when playing live, the audio output); the display timer redraws the latency view and the
take view by turns, drawing only what is new, so the engine's latencies are not paid for by the
window that shows them. At the end the take records what it ran with and what it cost."""
from __future__ import annotations

import time

from kazeia.engine.synthesis.placement import stage_lines

from .takes import Take


class LiveTake:
    def __init__(self, latency, take_view, audio):
        self.latency, self.take_view, self.audio = latency, take_view, audio
        self.take: Take | None = None
        self.started_at = 0.0
        self._timings = None
        self._dirty = False
        self._ticks = 0
        self._playing = False

    @property
    def running(self) -> bool:
        return self.take is not None

    def begin(self, take: Take, play_live: bool, max_samples: int) -> str | None:
        """A take about to run; returns why live playback is off, if it failed to start."""
        self.take, self._timings, self._dirty = take, None, False
        self.started_at = time.perf_counter()
        self._playing = play_live
        self.take_view.clear(take.sample_rate)
        self.latency.title.setText("starting ...")
        if play_live:
            try:
                self.audio.begin_stream(max_samples)
            except Exception as e:
                self._playing = False
                return f"live playback off: {e}"
        return None

    def started(self, ran) -> None:
        if self.take is not None:   # the take records what runs, not what the combo boxes say
            self.take.placement, self.take.threads = dict(ran.placement), ran.threads

    def chunk(self, chunk) -> None:
        if self._playing:
            self.audio.append(chunk.audio)
        self.take_view.append(chunk.audio)
        self._timings = chunk.timings
        self._dirty = True

    def tick(self) -> None:
        """One display tick: the latency view and the take view take turns."""
        self._ticks += 1
        if self._timings is None or self.take is None:
            return
        if self._ticks % 2 == 0 and self._dirty:
            self._dirty = False
            self.latency.show_live(self._timings, time.perf_counter() - self.started_at)
        elif self._ticks % 2 == 1:
            self.take_view.flush()

    def finish(self, outcome) -> Take | None:
        """The take, recorded and drawn whole (not yet kept: the window keeps it)."""
        take, self.take = self.take, None
        self._dirty = False
        if self._playing:
            self.audio.end_stream()
        if take is None:
            return None
        if outcome.text is not None:   # (a typed take: its text is what was typed)
            take.text = outcome.text
        take.record(outcome.result, outcome.ran, stage_lines(outcome.result.placement_report), outcome.chunks)
        self.take_view.flush(final=True)
        self.take_view.shown = take.id   # (selecting it next does not draw it again)
        return take

    def fail(self) -> None:
        self.take = None
        self.audio.stop()
        self.latency.title.setText("")
