"""One `POST /v1/audio/speech`: the request as OpenAI specifies it (plus Kazeia's own optional
sampling fields), checked field by field, and its synthesis: a stream of the engine (a request that
is one chunk joins the engine's batch as one session; a long or marked-up text runs as its chunks
on the same batcher) whose audio is encoded as it comes, or, with a speed other than 1.0, the whole
take time-stretched (Rubber Band: pitch kept) and then encoded."""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..requests import SamplingParams
from .encoders import encode_whole
from .errors import ApiError

if TYPE_CHECKING:
    from ..synthesis import Engine
    from .voices import NamedVoice

MAX_INPUT_CHARS = 4096   # OpenAI's limit
MODEL_ALIASES = ("kazeia", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")   # names clients hard-code


class SpeechRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")   # a misspelt field is an error, not ignored

    model: str = Field(min_length=1)
    input: str = Field(max_length=MAX_INPUT_CHARS)
    voice: str | dict[str, str]
    instructions: str | None = Field(None, max_length=MAX_INPUT_CHARS)
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float = Field(1.0, ge=0.25, le=4.0)
    stream_format: Literal["audio", "sse"] = "audio"
    # Kazeia's own
    language: str | None = None
    seed: int | None = Field(None, ge=0, lt=2 ** 64)
    temperature: float | None = Field(None, gt=0, le=10)
    top_k: int | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_frames: int | None = Field(None, ge=1)

    @field_validator("input")
    @classmethod
    def _has_words(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("input is empty: nothing to say")
        return value

    @property
    def voice_name(self) -> str:
        if isinstance(self.voice, dict):   # OpenAI's custom-voice form {"id": ...}
            if set(self.voice) != {"id"}:
                raise ApiError(400, "voice must be a name or {\"id\": name}", "voice", "invalid_value")
            return self.voice["id"]
        return self.voice

    def sampling(self, engine: "Engine") -> SamplingParams:
        chosen = {k: getattr(self, k) for k in ("seed", "temperature", "top_k", "top_p", "max_frames")
                  if getattr(self, k) is not None}
        return SamplingParams.from_model(engine.info, **chosen)


def parse(body: dict) -> SpeechRequest:
    try:
        return SpeechRequest.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = f"unknown field {param!r}"
        elif first["type"] == "missing":
            message = f"{param} is required"
        else:
            message = f"{param}: {message}"
        raise ApiError(400, message, param, first["type"]) from None


def check_speed(speed: float) -> None:
    if speed != 1.0 and shutil.which("rubberband") is None:
        raise ApiError(400, "a speed other than 1.0 needs the Rubber Band program (Debian: rubberband-cli), "
                            "which this machine lacks", "speed", "unsupported_value")


def stretch(audio: np.ndarray, sample_rate: int, speed: float) -> np.ndarray:
    """`speed` times faster (2.0: half the duration), pitch kept."""
    import pyrubberband
    return np.asarray(pyrubberband.time_stretch(audio, sample_rate, speed), np.float32)


@dataclass
class SpeechJob:
    """The synthesis of one request, driven from the server's threads: `start` (checks and submits;
    ValueError names what is wrong), then `next_audio` until None. `cancel` stops it within a frame."""
    engine: "Engine"
    request: SpeechRequest
    voice: "NamedVoice"
    lexicon: object = None
    started: float = field(default_factory=time.perf_counter)
    ttfa_ms: float | None = None
    samples: int = 0
    frames: int = 0
    _stream: object = None

    def start(self) -> None:
        r, v = self.request, self.voice
        instruct = r.instructions if r.instructions is not None else v.instruct
        self._stream = self.engine.stream(r.input, speaker=v.speaker, language=r.language or "auto", instruct=instruct,
                                          voice=v.voice, sampling=r.sampling(self.engine), lexicon=self.lexicon)

    def next_audio(self) -> np.ndarray | None:
        for chunk in self._stream:
            if self.ttfa_ms is None:
                self.ttfa_ms = 1000 * (time.perf_counter() - self.started)
            self.samples += len(chunk.audio)
            self.frames = chunk.timings.frames
            return chunk.audio
        result = self._stream.result
        if result is not None:
            self.frames = len(result.codes)
        return None

    def cancel(self) -> None:
        if self._stream is not None:
            self._stream.cancel()

    @property
    def stop_reason(self) -> str | None:
        result = getattr(self._stream, "result", None)
        return result.stop_reason if result is not None else None

    @property
    def rtf(self) -> float:
        seconds = self.samples / self.engine.info.sample_rate
        return (time.perf_counter() - self.started) / seconds if seconds else float("nan")


def whole_take(fmt: str, audio: np.ndarray, sample_rate: int, speed: float) -> bytes:
    if speed != 1.0:
        audio = stretch(audio, sample_rate, speed)
    return encode_whole(fmt, audio, sample_rate)
