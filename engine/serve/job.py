"""One synthesis of a server, whatever protocol asked for it: a stream of the engine (a text that is
one chunk joins the engine's batch as one session; a long or marked-up text runs as its chunks on the
same batcher), driven from the server's worker threads, with what the request log reports."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..synthesis.requests import Request, SamplingParams

if TYPE_CHECKING:
    from ..synthesis.engine import Engine
    from .voices import NamedVoice


@dataclass
class SpeechJob:
    """`start` (checks and submits; ValueError or MarkupError names what is wrong), then `next_audio`
    until None. `cancel` stops it within a frame. `instruct`: the request's, else the voice's."""
    engine: "Engine"
    text: str
    voice: "NamedVoice"
    language: str | None = None
    instruct: str | None = None
    sampling: SamplingParams | None = None
    lexicon: object = None
    streaming_text: bool | None = None   # (None: the reference wrapper's default for the model)
    started: float = field(default_factory=time.perf_counter)
    ttfa_ms: float | None = None
    samples: int = 0
    frames: int = 0
    stage_ms: dict = field(default_factory=dict)   # mean ms per frame of talker, code_predictor, decoder
    _stream: object = None

    def request(self, text: str, **more) -> Request:
        """The engine's Request of this job, of `text` (`more`: a live job's hold)."""
        v = self.voice
        return Request(text, speaker=v.speaker, language=self.language or "auto",
                       instruct=self.instruct if self.instruct is not None else v.instruct, voice=v.voice,
                       sampling=self.sampling, streaming_text=self.streaming_text, lexicon=self.lexicon, **more)

    def start(self) -> None:
        self._stream = self.engine.open_take(self.request(self.text))

    def next_audio(self) -> np.ndarray | None:
        for chunk in self._stream:
            if self.ttfa_ms is None:
                self.ttfa_ms = 1000 * (time.perf_counter() - self.started)
            self.samples += len(chunk.audio)
            t = chunk.timings
            self.frames = t.frames
            self.stage_ms = {name: sum(v) / len(v) for name, v in (("talker", t.talker_ms),
                             ("code_predictor", t.code_predictor_ms), ("decoder", t.decoder_ms)) if v}
            return chunk.audio
        result = self._stream.result
        if result is not None:
            self.frames = len(result.codes)
        return None

    def cancel(self) -> None:
        if self._stream is not None:
            self._stream.cancel()

    @property
    def rtf(self) -> float:
        seconds = self.samples / self.engine.info.sample_rate
        return (time.perf_counter() - self.started) / seconds if seconds else float("nan")
