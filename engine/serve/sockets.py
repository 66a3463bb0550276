"""The server's WebSockets for text that arrives while it is spoken, each turn the take the whole
text would be (live.py): Kazeia's own `/v1/audio/speech/live`, and `/v1/speak`, the shape of Deepgram's streaming
text-to-speech socket, which the Deepgram plugins of LiveKit Agents and Pipecat drive unchanged when
pointed at Kazeia's address (docs/serving.md says why that one). Keys, voices, admission, metrics and
the request log are the HTTP app's; a refused handshake is an HTTP answer (401, 404, 400, 429 with
Retry-After), as for `POST /v1/audio/speech`."""
from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import TYPE_CHECKING, Callable, Literal

import numpy as np
from fastapi import FastAPI, WebSocket
from fastapi.responses import JSONResponse
from pydantic import Field
from starlette.websockets import WebSocketDisconnect, WebSocketState

from .. import untrusted
from .encoders import STREAMED, encoder, pcm16, wav_header
from .errors import ApiError, error_body
from .live import LiveJob, LiveService, Turns, run_idle_watch
from .speech import MAX_INPUT_CHARS, SamplingFields, parse
from .voices import UnknownVoice

if TYPE_CHECKING:
    from .voices import VoiceBook

LIVE_PATH, DEEPGRAM_PATH = "/v1/audio/speech/live", "/v1/speak"
DEEPGRAM_RATES = (8000, 16000, 24000, 32000, 48000)
MESSAGE_DEPTH = 4   # a message is one flat object ({"type": "text", "text": ...}); nothing needs more


class LiveQuery(SamplingFields):
    """Kazeia's socket: its query string."""
    voice: str
    language: str | None = None
    instructions: str | None = Field(None, max_length=MAX_INPUT_CHARS)
    response_format: Literal["pcm", "wav", "mp3", "opus", "aac"] = "pcm"
    # speech starts once the text holds this much reading: fewer stalls from a slow writer, later audio
    hold_ms: float = Field(0.0, ge=0.0, le=10_000.0)


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


class Sender:
    """One socket's sends, one at a time (the turns' audio and the replies to the client interleave)."""

    def __init__(self, ws: WebSocket):
        self._ws, self._lock = ws, asyncio.Lock()

    async def json(self, message: dict) -> None:
        async with self._lock:
            await self._ws.send_text(json.dumps(message))

    async def bytes(self, data: bytes) -> None:
        if data:
            async with self._lock:
                await self._ws.send_bytes(data)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        async with self._lock:
            if self._ws.application_state == WebSocketState.CONNECTED:
                with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                    await self._ws.close(code, reason[:120])


def given_key(ws: WebSocket) -> tuple[str | None, str | None]:
    """(the key the client sent, the subprotocol to accept): `Authorization: Bearer|Token KEY`, or a
    browser's `Sec-WebSocket-Protocol: token, KEY` (it cannot set headers)."""
    scheme, _, key = ws.headers.get("authorization", "").partition(" ")
    if scheme.lower() in ("bearer", "token") and key.strip():
        return key.strip(), None
    protocols = [p.strip() for p in ws.headers.get("sec-websocket-protocol", "").split(",") if p.strip()]
    if len(protocols) == 2 and protocols[0].lower() in ("token", "bearer"):
        return protocols[1], protocols[0]
    return None, None


async def deny(ws: WebSocket, e: ApiError) -> None:
    """A refused handshake: an HTTP answer where the server can send one, else a close code."""
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        await ws.send_denial_response(JSONResponse(error_body(e.status, e.message, e.param, e.code),
                                                   status_code=e.status, headers=e.headers))
    else:
        await ws.close(1013 if e.status == 429 else 1008, e.message[:120])


def add_live_sockets(app: FastAPI, service: LiveService, voices: "VoiceBook", check_key: Callable[[str | None], None],
                     takes_instructions: bool) -> None:
    engine, settings = service.engine, service.settings
    rate = engine.info.sample_rate

    async def handshake(ws: WebSocket, query_type, checks) -> tuple | None:
        """(query, voice, subprotocol), or None when refused (the client was answered)."""
        key, subprotocol = given_key(ws)
        try:
            check_key(key)
            query = parse(dict(ws.query_params), query_type)
            name = query.voice if isinstance(query, LiveQuery) else query.model
            try:
                voice = voices.resolve(name)
            except UnknownVoice as e:
                raise ApiError(404, e.message, "voice" if isinstance(query, LiveQuery) else "model",
                               "voice_not_found") from None
            checks(query)
            if service.admission.admitted >= service.admission.limit:
                service.rejected()
                raise service.admission.full()
        except ApiError as e:
            await deny(ws, e)
            return None
        await ws.accept(subprotocol=subprotocol)
        return query, voice, subprotocol

    async def end(turns: Turns, send: Sender, reason: str) -> None:
        """Every turn spoken to its end, then the socket closes."""
        await turns.drain()
        await send.close(1000, reason)

    async def converse(ws: WebSocket, send: Sender, turns: Turns, sink, on_message, idle_code: str) -> None:
        """Reads the client's messages until it closes, goes away or idles; every turn ends with it."""
        on_error = sink.error

        async def on_idle() -> None:
            await on_error(idle_code, f"no message for {settings.idle_timeout_s:g} s: what was sent is spoken, "
                                      "then the socket closes")
            await end(turns, send, "idle")
        watch = asyncio.create_task(run_idle_watch(turns, settings.idle_timeout_s, on_idle))
        try:
            while True:
                try:
                    message = await ws.receive()
                except (RuntimeError, WebSocketDisconnect):
                    message = {"type": "websocket.disconnect"}
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") is None:
                    await on_error("binary_not_accepted", "send JSON text messages; audio only goes out")
                    continue
                try:
                    data = untrusted.loads(message["text"], "the message", settings.max_message_bytes,
                                           max_depth=MESSAGE_DEPTH)
                    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
                        raise untrusted.InputError("the message: a JSON object with a \"type\" is needed")
                except untrusted.InputError as e:
                    await on_error("invalid_json", str(e))
                    continue
                if await on_message(data) is False:
                    return
        finally:
            # whatever ended the conversation (a close, a client gone, a handler that raised): every
            # turn it holds is cancelled and its slot freed (after a close or idle end: all sent already)
            watch.cancel()
            await asyncio.shield(turns.abandon())

    # ---- Kazeia's own -------------------------------------------------------------------------
    def live_checks(query: LiveQuery) -> None:
        if query.instructions is not None and not takes_instructions:
            raise ApiError(400, f"{settings.model_name} takes no instructions (VoiceDesign and 1.7B CustomVoice "
                                "models do)", "instructions", "unsupported_value")

    @app.websocket(LIVE_PATH)
    async def live(ws: WebSocket):
        accepted = await handshake(ws, LiveQuery, live_checks)
        if accepted is None:
            return
        query, voice, _ = accepted
        send = Sender(ws)
        sink = LiveSink(send, query.response_format, rate)
        turns = Turns(service, voice, query.language, query.instructions, query.sampling(engine, settings.max_frames),
                      sink, prefix="live", hold_ms=query.hold_ms)
        await send.json({"type": "ready", "voice": voice.name, "sample_rate": rate, "format": query.response_format,
                         "idle_timeout_s": settings.idle_timeout_s})

        async def on_message(data: dict) -> bool:
            kind = data["type"]
            if kind == "text":
                text = data.get("text")
                if not isinstance(text, str):
                    await sink.error("invalid_value", "text: a string")
                elif len(text) > MAX_INPUT_CHARS:
                    await sink.error("text_too_long", f"text: at most {MAX_INPUT_CHARS} characters a message")
                else:
                    await turns.write(text)
            elif kind == "flush":
                if await turns.flush() is None:
                    await sink.error("nothing_to_flush", "no turn is open: send text first")
            elif kind == "cancel":
                await send.json({"type": "cancelled", "turns": await turns.cancel()})
            elif kind == "close":
                await end(turns, send, "closed by the client")
                return False
            else:
                await sink.error("unknown_type", f"unknown message type {kind!r}: text, flush, cancel or close")
            return True

        await converse(ws, send, turns, sink, on_message, "idle_timeout")

    # ---- Deepgram's shape ---------------------------------------------------------------------
    def deepgram_checks(query: DeepgramQuery) -> None:
        if query.sample_rate not in DEEPGRAM_RATES:
            raise ApiError(400, f"sample_rate {query.sample_rate} is not one of {', '.join(map(str, DEEPGRAM_RATES))}",
                           "sample_rate", "unsupported_value")
        if query.encoding != "linear16" and query.sample_rate not in (8000, 16000):
            raise ApiError(400, f"{query.encoding} is sent at 8000 or 16000 Hz", "sample_rate", "unsupported_value")

    @app.websocket(DEEPGRAM_PATH)
    async def speak(ws: WebSocket):
        accepted = await handshake(ws, DeepgramQuery, deepgram_checks)
        if accepted is None:
            return
        query, voice, _ = accepted
        send = Sender(ws)
        sink = DeepgramSink(send, query, rate)
        turns = Turns(service, voice, query.language, None, query.sampling(engine, settings.max_frames), sink,
                      prefix="speak")
        await send.json({"type": "Metadata", "request_id": str(uuid.uuid4()), "model_name": voice.name,
                         "model_version": settings.model_name, "model_uuid": settings.model_name})

        async def on_message(data: dict) -> bool:
            kind = data["type"]
            if kind == "Speak":
                text = data.get("text")
                if not isinstance(text, str) or len(text) > MAX_INPUT_CHARS:
                    await sink.error("INVALID_TEXT", f"Speak's text: a string of at most {MAX_INPUT_CHARS} characters")
                else:
                    await turns.write(text)
            elif kind == "Flush":
                turn = await turns.flush()
                if turn is None:   # (nothing said since the last flush: confirmed at once)
                    await sink.flushed()
            elif kind == "Clear":
                await turns.cancel()
                await send.json({"type": "Cleared", "sequence_id": sink.sequence})
            elif kind == "Close":
                await end(turns, send, "closed by the client")
                return False
            else:
                await sink.error("UNKNOWN_MESSAGE", f"unknown message type {kind!r}: Speak, Flush, Clear or Close")
            return True

        await converse(ws, send, turns, sink, on_message, "IDLE_TIMEOUT")


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
