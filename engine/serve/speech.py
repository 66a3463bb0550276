"""One `POST /v1/audio/speech`: the request as OpenAI specifies it (plus Kazeia's own optional
sampling fields), checked field by field; with a speed other than 1.0 its whole take is
time-stretched (Rubber Band: pitch kept) before it is encoded."""
from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..synthesis.requests import MAX_FRAMES, MAX_TEMPERATURE, MAX_TOP_K, SamplingParams
from .encoders import encode_whole
from .errors import ApiError

if TYPE_CHECKING:
    from ..synthesis.engine import Engine

MAX_INPUT_CHARS = 4096   # OpenAI's limit
MODEL_ALIASES = ("kazeia", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")   # names clients hard-code


class SamplingFields(BaseModel):
    """Kazeia's own sampling fields of a request (speech, and the live sockets' query)."""
    model_config = ConfigDict(extra="forbid")   # a misspelt field is an error, not ignored

    seed: int | None = Field(None, ge=0, le=2 ** 53 - 1)   # (the integers every JSON reader keeps exact)
    temperature: float | None = Field(None, gt=0, le=MAX_TEMPERATURE, allow_inf_nan=False)
    top_k: int | None = Field(None, ge=0, le=MAX_TOP_K)   # (0: off)
    top_p: float | None = Field(None, gt=0, le=1, allow_inf_nan=False)
    max_frames: int | None = Field(None, ge=1, le=MAX_FRAMES)

    def sampling(self, engine: "Engine", max_frames: int | None = None) -> SamplingParams:
        """The request's sampling; `max_frames`: the server's cap (it wins over a larger ask)."""
        chosen = {k: getattr(self, k) for k in ("seed", "temperature", "top_k", "top_p", "max_frames")
                  if getattr(self, k) is not None}
        if max_frames is not None:
            chosen["max_frames"] = min(chosen.get("max_frames", max_frames), max_frames)
        return SamplingParams.from_model(engine.info, **chosen)


class SpeechRequest(SamplingFields):
    model: str = Field(min_length=1)
    input: str = Field(max_length=MAX_INPUT_CHARS, json_schema_extra={"pattern": r"\S"})   # (some words: checked below)
    voice: str | dict[str, str]
    instructions: str | None = Field(None, max_length=MAX_INPUT_CHARS)
    response_format: Literal["mp3", "opus", "aac", "flac", "wav", "pcm"] = "mp3"
    speed: float = Field(1.0, ge=0.25, le=4.0, allow_inf_nan=False)
    stream_format: Literal["audio", "sse"] = "audio"
    # Kazeia's own
    language: str | None = None
    streaming_text: bool | None = Field(None, description="feed the text while generating (the server's "
                                        "setting when absent; false: the whole text in the prompt)")

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


def parse(body: dict, model: type[SamplingFields] = SpeechRequest):
    """`body` as a `model`; ApiError 400 naming the first bad field."""
    try:
        return model.model_validate(body)
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


def whole_take(fmt: str, audio: np.ndarray, sample_rate: int, speed: float) -> bytes:
    if speed != 1.0:
        audio = stretch(audio, sample_rate, speed)
    return encode_whole(fmt, audio, sample_rate)
