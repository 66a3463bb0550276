"""The HTTP app: OpenAI's `POST /v1/audio/speech` over the batched engine, and `GET /v1/models`,
`/v1/audio/voices`, `/health`, `/metrics`; with a Wyoming port, Home Assistant's protocol beside it
on the same engine, voices and limits (wyoming_tts.py). Every request is a session of the engine's batcher, so
concurrent requests share each talker and code-predictor step; beyond `max_batch` running and
`max_queue` waiting a request gets 429 with Retry-After. A client that goes away mid-stream cancels
its session within a frame. One log line per request."""
from __future__ import annotations

import base64
import contextlib
import hmac
import json
import logging
import math
import threading
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Callable

import anyio
import numpy as np
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import untrusted
from ..text.markup import MarkupError
from .boundary import Boundary, BoundaryMiddleware
from .encoders import MEDIA_TYPES, STREAMED, encoder
from .errors import ApiError, ErrorBody, api_error_handler, http_error_handler, param_of
from .metrics import Metrics
from .settings import ServerSettings
from .job import SpeechJob
from .live import LiveService
from .sockets import add_live_sockets
from .speech import MODEL_ALIASES, SpeechRequest, check_speed, parse, whole_take
from .voices import UnknownVoice, VoiceBook

if TYPE_CHECKING:
    from ..synthesis.engine import Engine

log = logging.getLogger("kazeia.serve")


class Admission:
    """Requests in the server (running or waiting for a batch slot), bounded."""

    def __init__(self, limit: int):
        self.limit = limit
        self.admitted = 0
        self._lock = threading.Lock()
        self._seconds: deque[float] = deque(maxlen=20)   # recent requests' durations

    def enter(self) -> bool:
        with self._lock:
            if self.admitted >= self.limit:
                return False
            self.admitted += 1
            return True

    def leave(self, seconds: float) -> None:
        with self._lock:
            self.admitted -= 1
            self._seconds.append(seconds)

    def full(self) -> ApiError:
        """The answer to a request beyond the limit: 429 with a Retry-After (the HTTP API, the live
        sockets' handshake and their turns say the same)."""
        wait = self.retry_after()
        return ApiError(429, f"the server is full ({self.limit} requests running or waiting); retry in {wait} s",
                        None, "server_busy", headers={"Retry-After": str(wait)})

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: a recent request's typical length."""
        recent = sorted(self._seconds)
        return max(1, math.ceil(recent[len(recent) // 2])) if recent else 1


class ClosingStreamingResponse(StreamingResponse):
    """A StreamingResponse that closes its body's generator however the response ends: a send that
    failed (the client read nothing for the send limit) leaves the generator waiting at a `yield`,
    where only a close runs its clean-up (the job cancelled, the slot freed)."""

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()


def create_app(engine: "Engine", voices: VoiceBook, settings: ServerSettings, lexicon=None,
               observer: Callable[[dict], None] | None = None) -> FastAPI:
    """`observer`: called (on the server's thread) with each finished request's log record (the
    workbench's Serve panel lists them)."""
    admission = Admission(settings.max_batch + settings.max_queue)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        limiter = anyio.to_thread.current_default_thread_limiter()   # each admitted request may wait in one
        limiter.total_tokens = max(limiter.total_tokens, admission.limit + 8)
        if settings.wyoming is None:
            yield
            return
        from .wyoming_tts import WyomingService
        service = WyomingService(app.state.live, voices)
        wyoming = await service.start(*settings.wyoming)
        try:
            yield
        finally:
            await wyoming.stop()

    app = FastAPI(title="Kazeia speech server", version="1", description="OpenAI-compatible speech on Kazeia's engine",
                  lifespan=lifespan)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    # (added last: outermost, so a foreign page's request is refused before CORS answers it)
    app.add_middleware(BoundaryMiddleware, boundary=Boundary(settings.listen_host, settings.allowed_hosts,
                                                             settings.cors_origins),
                       send_timeout_s=settings.send_timeout_s)
    app.add_exception_handler(ApiError, api_error_handler)
    app.add_exception_handler(StarletteHTTPException, http_error_handler)
    metrics = Metrics()
    rate = engine.info.sample_rate
    names = (settings.model_name, *MODEL_ALIASES)
    info = engine.info   # (the reference drops a 0.6B CustomVoice model's instruction: refused, not ignored)
    takes_instructions = info.variant == "voice_design" or (info.variant == "custom_voice" and info.size != "0b6")
    app.state.admission, app.state.metrics = admission, metrics

    def check_key(given: str | None) -> None:
        if settings.api_key is None:
            return
        if given is None or not hmac.compare_digest(given.encode(), settings.api_key.encode()):
            raise ApiError(401, "missing or wrong API key: send Authorization: Bearer <key>", None, "invalid_api_key")

    def authorize(request: Request) -> None:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        check_key(key.strip() if scheme.lower() == "bearer" else None)

    async def read_json(request: Request) -> dict:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise ApiError(415, f"the body must be application/json, not {kind or 'untyped'}", None,
                           "unsupported_media_type")
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > settings.max_body_bytes:
            raise ApiError(413, f"the body is over {settings.max_body_bytes} bytes", None, "request_too_large")
        body = bytearray()
        try:
            with anyio.fail_after(settings.read_timeout_s):   # (a client sending a byte a second)
                async for part in request.stream():
                    body += part
                    if len(body) > settings.max_body_bytes:
                        raise ApiError(413, f"the body is over {settings.max_body_bytes} bytes", None,
                                       "request_too_large")
        except TimeoutError:
            raise ApiError(408, f"the body did not arrive whole within {settings.read_timeout_s:g} s", None,
                           "request_timeout") from None
        try:
            data = untrusted.loads(body, "the body", settings.max_body_bytes)
        except untrusted.InputError as e:
            raise ApiError(400, str(e), None, "invalid_json") from None
        if not isinstance(data, dict):
            raise ApiError(400, "the body must be a JSON object", None, "invalid_json")
        return data

    def finish(job: SpeechJob, rid: str, outcome: str) -> None:
        seconds = time.perf_counter() - job.started
        admission.leave(seconds)
        metrics.occupancy(admission.admitted, settings.max_batch)
        metrics.requests.labels(outcome).inc()
        if outcome == "ok":
            if job.ttfa_ms is not None:
                metrics.ttfa.observe(job.ttfa_ms / 1000)
            if job.samples:
                metrics.rtf.observe(job.rtf)
        ttfa = f"{job.ttfa_ms:.0f}" if job.ttfa_ms is not None else "-"
        rtf = f"{job.rtf:.2f}" if job.samples else "-"
        log.info("%s voice=%s chars=%d frames=%d ttfa_ms=%s rtf=%s outcome=%s", rid, job.voice.name,
                 len(job.text), job.frames, ttfa, rtf, outcome)
        if observer is not None:
            observer({"id": rid, "voice": job.voice.name, "chars": len(job.text), "frames": job.frames,
                      "ttfa_ms": job.ttfa_ms, "rtf": job.rtf if job.samples else None, "stage_ms": dict(job.stage_ms),
                      "outcome": outcome, "seconds": seconds})

    live = LiveService(engine, admission, settings, finish, metrics.requests.labels("rejected").inc, lexicon)
    app.state.live = live
    add_live_sockets(app, live, voices, check_key, takes_instructions)

    speech_schema = {"requestBody": {"required": True,
                                     "content": {"application/json": {"schema": SpeechRequest.model_json_schema()}}}}

    errors = {status: {"description": what, "model": ErrorBody} for status, what in (
        (400, "a bad field, named in param"), (401, "a missing or wrong API key"),
        (403, "a web page's Origin or a Host this server was not told of"), (404, "an unknown model or voice"),
        (408, "a body that did not arrive in time"), (413, "a body over the limit"), (415, "a body that is not JSON"),
        (422, "input whose markup cannot be read (line and column in the message)"), (429, "the queue is full (Retry-After)"),
        (503, "the model is loading"), (504, "the request ran over its time limit"))}
    audio = {t: {"schema": {"type": "string", "format": "binary"}} for t in MEDIA_TYPES.values()}
    audio["text/event-stream"] = {"schema": {"type": "string"}}

    @app.post("/v1/audio/speech", openapi_extra=speech_schema, response_class=Response,
              responses={200: {"description": "the audio (or its SSE events)", "content": audio}, **errors})
    async def speech(request: Request):
        authorize(request)
        req = parse(await read_json(request))
        if req.model not in names:
            raise ApiError(404, f"unknown model {req.model!r}; this server has {settings.model_name!r} "
                                f"(also answers to {', '.join(MODEL_ALIASES)})", "model", "model_not_found")
        try:
            voice = voices.resolve(req.voice_name)
        except UnknownVoice as e:
            raise ApiError(404, e.message, "voice", "voice_not_found") from None
        check_speed(req.speed)
        if req.instructions is not None and not takes_instructions:
            raise ApiError(400, f"{settings.model_name} takes no instructions (VoiceDesign and 1.7B CustomVoice "
                                "models do)", "instructions", "unsupported_value")
        if not admission.enter():
            metrics.requests.labels("rejected").inc()
            raise admission.full()
        metrics.occupancy(admission.admitted, settings.max_batch)
        rid = "speech-" + uuid.uuid4().hex[:12]
        job = SpeechJob(engine, req.input, voice, req.language, req.instructions, req.sampling(engine, settings.max_frames),
                        lexicon, settings.streaming_text if req.streaming_text is None else req.streaming_text)
        try:
            await anyio.to_thread.run_sync(job.start)
            first = await anyio.to_thread.run_sync(job.next_audio)
        except (ValueError, MarkupError) as e:
            job.cancel()
            finish(job, rid, "invalid")
            if isinstance(e, MarkupError):   # well-formed JSON, a text that cannot be read: 422, where it goes wrong
                raise ApiError(422, str(e), "input", "invalid_markup") from None
            raise ApiError(400, str(e), param_of(str(e)), "invalid_value") from None
        except BaseException:
            job.cancel()
            finish(job, rid, "error")
            raise
        headers = {"x-request-id": rid}
        sse = req.stream_format == "sse"
        if req.speed != 1.0 or req.response_format not in STREAMED:
            return await whole_response(job, rid, first, req, headers)
        media = "text/event-stream" if sse else MEDIA_TYPES[req.response_format]
        return ClosingStreamingResponse(stream_body(job, rid, first, req.response_format, sse), media_type=media,
                                        headers=headers)

    def delta(data: bytes) -> bytes:
        event = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}
        return f"data: {json.dumps(event)}\n\n".encode()

    def done(job: SpeechJob) -> bytes:
        tokens = engine.count_text_tokens(job.text)
        event = {"type": "speech.audio.done",
                 "usage": {"input_tokens": tokens, "output_tokens": job.frames, "total_tokens": tokens + job.frames}}
        return f"data: {json.dumps(event)}\n\n".encode()

    async def stream_body(job: SpeechJob, rid: str, first: np.ndarray | None, fmt: str, sse: bool):
        enc = encoder(fmt, rate)
        outcome = "error"
        try:
            audio = first
            while audio is not None:
                data = enc.feed(audio)
                if data:
                    yield delta(data) if sse else data
                if time.perf_counter() - job.started > settings.request_timeout_s:
                    job.cancel()
                    outcome = "timeout"
                    break
                audio = await anyio.to_thread.run_sync(job.next_audio)
            tail = enc.finish()
            if tail:
                yield delta(tail) if sse else tail
            if sse:
                yield done(job)
            if outcome != "timeout":
                outcome = "ok"
        except (anyio.get_cancelled_exc_class(), GeneratorExit):   # (gone, or read nothing for the send limit)
            outcome = "disconnected"
            raise
        finally:
            job.cancel()
            finish(job, rid, outcome)

    async def whole_response(job: SpeechJob, rid: str, first: np.ndarray | None, req: SpeechRequest, headers: dict):
        """The whole take in one body: a format that does not stream (FLAC), or stretched (speed != 1)."""
        try:
            parts = [] if first is None else [first]
            while True:
                if time.perf_counter() - job.started > settings.request_timeout_s:
                    raise ApiError(504, f"the request ran over its time limit ({settings.request_timeout_s:.0f} s)",
                                   None, "timeout")
                audio = await anyio.to_thread.run_sync(job.next_audio)
                if audio is None:
                    break
                parts.append(audio)
            take = np.concatenate(parts) if parts else np.zeros(0, np.float32)
            data = await anyio.to_thread.run_sync(whole_take, req.response_format, take, rate, req.speed)
        except ApiError:
            job.cancel()
            finish(job, rid, "timeout")
            raise
        except BaseException:
            job.cancel()
            finish(job, rid, "error")
            raise
        finish(job, rid, "ok")
        if req.stream_format == "sse":
            return Response(delta(data) + done(job), media_type="text/event-stream", headers=headers)
        return Response(data, media_type=MEDIA_TYPES[req.response_format], headers=headers)

    @app.get("/v1/models", responses={401: errors[401]})
    async def models(request: Request):
        authorize(request)
        created = int(engine.info.path.stat().st_mtime)
        return {"object": "list", "data": [{"id": n, "object": "model", "created": created, "owned_by": "kazeia"}
                                           for n in names]}

    @app.get("/v1/models/{model_id}", responses={401: errors[401], 404: errors[404]})
    async def model(model_id: str, request: Request):
        authorize(request)
        if model_id not in names:
            raise ApiError(404, f"unknown model {model_id!r}", "model", "model_not_found")
        return {"id": model_id, "object": "model", "created": int(engine.info.path.stat().st_mtime),
                "owned_by": "kazeia"}

    @app.get("/v1/audio/voices", responses={401: errors[401]})
    async def voice_list(request: Request):
        authorize(request)
        return {"model": settings.model_name, "variant": info.variant, "voices": voices.listing(),
                "languages": ["auto", *info.languages], "instructions": takes_instructions}

    @app.get("/health")
    async def health():
        return JSONResponse({"status": "ok", "model": settings.model_name, "requests": admission.admitted,
                             "max_batch": settings.max_batch, "max_queue": settings.max_queue})

    @app.get("/metrics", responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, 401: errors[401]},
             response_class=Response)
    async def prometheus(request: Request):
        authorize(request)
        return Response(metrics.exposition(), media_type=metrics.content_type)

    return app
