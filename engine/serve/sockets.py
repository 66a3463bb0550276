"""The server's WebSockets for text that arrives while it is spoken, each turn the take the whole
text would be (live.py), one endpoint class per protocol on the shared message loop of
socket_endpoint.py: Kazeia's own `/v1/audio/speech/live` (`LiveSocket`), and `/v1/speak`
(`DeepgramSocket`), the shape of Deepgram's streaming text-to-speech socket, which the Deepgram
plugins of LiveKit Agents and Pipecat drive unchanged when pointed at Kazeia's address
(docs/serving.md says why that one). Keys, voices, admission, metrics and the request log are the
HTTP app's (ServerState); a refused handshake is an HTTP answer (401, 404, 400, 429 with
Retry-After), as for `POST /v1/audio/speech`."""
from __future__ import annotations

import uuid
from typing import Annotated, Literal

import numpy as np
from fastapi import APIRouter, WebSocket
from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from ..synthesis.requests import MAX_HOLD_MS
from .encoders import STREAMED, encoder, pcm16, wav_header
from .errors import ApiError
from .live import LiveJob, Turns
from .socket_endpoint import Sender, SocketEndpoint
from .speech import MAX_INPUT_CHARS, SamplingFields

LIVE_PATH, DEEPGRAM_PATH = "/v1/audio/speech/live", "/v1/speak"
DEEPGRAM_RATES = (8000, 16000, 24000, 32000, 48000)

router = APIRouter()


@router.websocket(LIVE_PATH)
async def live_socket(ws: WebSocket):
    await LiveSocket(ws, ws.app.state).serve()


@router.websocket(DEEPGRAM_PATH)
async def deepgram_socket(ws: WebSocket):
    await DeepgramSocket(ws, ws.app.state).serve()


def check_hold_ms(hold_ms: float) -> float:
    """`hold_ms` when from 0 to MAX_HOLD_MS (the engine's one bound, Request.validate's), else the error a
    bound of the query's other fields gives, before the socket is accepted."""
    if not hold_ms <= MAX_HOLD_MS:   # (NaN too)
        raise PydanticCustomError("less_than_equal", "Input should be less than or equal to {le}", {"le": MAX_HOLD_MS})
    if not hold_ms >= 0:
        raise PydanticCustomError("greater_than_equal", "Input should be greater than or equal to {ge}", {"ge": 0})
    return hold_ms


# ---- Kazeia's own -------------------------------------------------------------------------------
class LiveQuery(SamplingFields):
    """Kazeia's socket: its query string."""
    voice: str
    language: str | None = None
    instructions: str | None = Field(None, max_length=MAX_INPUT_CHARS)
    response_format: Literal["pcm", "wav", "mp3", "opus", "aac"] = "pcm"
    # speech starts once the text holds this much reading: fewer stalls from a slow writer, later audio
    hold_ms: Annotated[float, AfterValidator(check_hold_ms)] = 0.0


class LiveSocket(SocketEndpoint):
    """`ready` once accepted; `text` deltas, `flush` (the turn's text ends), `cancel` (every turn in
    flight stops), `close` (every turn spoken, then the socket closes); each turn's audio through
    `LiveSink`."""
    query_type, voice_param, turn_prefix = LiveQuery, "voice", "live"
    idle_code, unknown_code = "idle_timeout", "unknown_type"

    def check(self, query: LiveQuery) -> None:
        self.state.check_instructions(query.instructions)

    def make_sink(self) -> "LiveSink":
        return LiveSink(self.send, self.query.response_format, self.state.sample_rate)

    def open_turns(self) -> Turns:
        return super().open_turns(self.query.instructions, self.query.hold_ms)

    def greeting(self) -> dict:
        return {"type": "ready", "voice": self.voice.name, "sample_rate": self.state.sample_rate,
                "format": self.query.response_format, "idle_timeout_s": self.settings.idle_timeout_s}

    async def on_text(self, data: dict) -> None:
        text = data.get("text")
        if not isinstance(text, str):
            await self.sink.error("invalid_value", "text: a string")
        elif len(text) > MAX_INPUT_CHARS:
            await self.sink.error("text_too_long", f"text: at most {MAX_INPUT_CHARS} characters a message")
        else:
            await self.turns.write(text)

    async def on_flush(self, data: dict) -> None:
        if await self.turns.flush() is None:
            await self.sink.error("nothing_to_flush", "no turn is open: send text first")

    async def on_cancel(self, data: dict) -> None:
        await self.send.json({"type": "cancelled", "turns": await self.turns.cancel()})

    handlers = {"text": on_text, "flush": on_flush, "cancel": on_cancel, "close": SocketEndpoint.close_by_client}


class LiveSink:
    """Kazeia's socket: `turn.start`, the turn's audio as binary messages in the chosen format (each
    turn a file of its own: a WAV header, an Ogg stream), `turn.end` with the turn's figures."""

    def __init__(self, send: Sender, fmt: str, rate: int):
        assert fmt in STREAMED
        self._send, self._fmt, self._rate = send, fmt, rate
        self._encoder = None

    async def start(self, turn: int) -> None:
        self._encoder = encoder(self._fmt, self._rate)
        await self._send.json({"type": "turn.start", "turn": turn})

    async def audio(self, turn: int, audio: np.ndarray) -> None:
        await self._send.bytes(self._encoder.feed(audio))

    async def end(self, turn: int, outcome: str, job: LiveJob) -> None:
        if self._encoder is not None:
            await self._send.bytes(self._encoder.finish())
            self._encoder = None
        await self._send.json({"type": "turn.end", "turn": turn, "outcome": outcome, "frames": job.frames,
                               "audio_ms": round(1000 * job.samples / self._rate),
                               "ttfa_ms": None if job.ttfa_ms is None else round(job.ttfa_ms, 1)})

    async def error(self, code: str, message: str) -> None:
        await self._send.json({"type": "error", "code": code, "message": message})


# ---- Deepgram's shape ---------------------------------------------------------------------------
class DeepgramQuery(SamplingFields):
    """Deepgram's `/v1/speak` query: `model` names a Kazeia voice. Deepgram's bookkeeping fields are
    taken and ignored; a field it does not have is an error."""
    model: str
    encoding: Literal["linear16", "mulaw", "alaw"] = "linear16"
    sample_rate: int = 24000
    container: Literal["none", "wav"] = "none"
    speed: float | None = Field(None, ge=1.0, le=1.0)   # (live audio is not time-stretched)
    language: str | None = None
    mip_opt_out: bool | None = None
    tag: str | None = None


class DeepgramSocket(SocketEndpoint):
    """`Metadata` once accepted; `Speak` text, `Flush` (the turn's text ends; `Flushed` once its audio
    is sent), `Clear` (every turn in flight stops), `Close`; each turn's audio through `DeepgramSink`."""
    query_type, voice_param, turn_prefix = DeepgramQuery, "model", "speak"
    idle_code, unknown_code = "IDLE_TIMEOUT", "UNKNOWN_MESSAGE"

    def check(self, query: DeepgramQuery) -> None:
        if query.sample_rate not in DEEPGRAM_RATES:
            raise ApiError(400, f"sample_rate {query.sample_rate} is not one of {', '.join(map(str, DEEPGRAM_RATES))}",
                           "sample_rate", "unsupported_value")
        if query.encoding != "linear16" and query.sample_rate not in (8000, 16000):
            raise ApiError(400, f"{query.encoding} is sent at 8000 or 16000 Hz", "sample_rate", "unsupported_value")

    def make_sink(self) -> "DeepgramSink":
        return DeepgramSink(self.send, self.query, self.state.sample_rate)

    def greeting(self) -> dict:
        model = self.settings.model_name
        return {"type": "Metadata", "request_id": str(uuid.uuid4()), "model_name": self.voice.name,
                "model_version": model, "model_uuid": model}

    async def on_speak(self, data: dict) -> None:
        text = data.get("text")
        if not isinstance(text, str) or len(text) > MAX_INPUT_CHARS:
            await self.sink.error("INVALID_TEXT", f"Speak's text: a string of at most {MAX_INPUT_CHARS} characters")
        else:
            await self.turns.write(text)

    async def on_flush(self, data: dict) -> None:
        if await self.turns.flush() is None:   # (nothing said since the last flush: confirmed at once)
            await self.sink.flushed()

    async def on_clear(self, data: dict) -> None:
        await self.turns.cancel()
        await self.send.json({"type": "Cleared", "sequence_id": self.sink.sequence})

    handlers = {"Speak": on_speak, "Flush": on_flush, "Clear": on_clear, "Close": SocketEndpoint.close_by_client}


class DeepgramSink:
    """Deepgram's socket: raw audio at the asked rate and encoding (a WAV header first with
    container=wav), `Flushed` with a sequence number once a flushed turn's audio is all sent, errors as
    `Warning`s (the connection goes on)."""

    def __init__(self, send: Sender, query: DeepgramQuery, rate: int):
        self._send, self._query, self._rate = send, query, rate
        self.sequence = 0
        self._resampler = self._encoder = None

    async def start(self, turn: int) -> None:
        q = self._query
        if q.sample_rate != self._rate:
            import soxr
            self._resampler = soxr.ResampleStream(self._rate, q.sample_rate, 1, dtype="float32")
        if q.encoding != "linear16":
            self._encoder = encoder(q.encoding, q.sample_rate)
        if q.container == "wav" and q.encoding == "linear16":
            await self._send.bytes(wav_header(q.sample_rate))

    def _encode(self, audio: np.ndarray, last: bool = False) -> bytes:
        if self._resampler is not None:
            audio = self._resampler.resample_chunk(audio, last=last)
        if self._encoder is not None:
            return self._encoder.feed(audio) + (self._encoder.finish() if last else b"")
        return pcm16(audio)

    async def audio(self, turn: int, audio: np.ndarray) -> None:
        await self._send.bytes(self._encode(audio))

    async def end(self, turn: int, outcome: str, job: LiveJob) -> None:
        await self._send.bytes(self._encode(np.zeros(0, np.float32), last=True))
        self._resampler = self._encoder = None
        if outcome == "ok":
            await self.flushed()

    async def flushed(self) -> None:
        await self._send.json({"type": "Flushed", "sequence_id": self.sequence})
        self.sequence += 1

    async def error(self, code: str, message: str) -> None:
        await self._send.json({"type": "Warning", "warn_code": code.upper(), "warn_msg": message})
