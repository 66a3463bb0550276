"""The HTTP API's routes, on `router` (create_app includes it): OpenAI's `POST /v1/audio/speech`
(streamed as it is made, as SSE events, or whole: FLAC, or time-stretched), `GET /v1/models` and
`/v1/models/{id}`, and `/v1/audio/voices`, `/health`, `/metrics`. Each reads the server's
`ServerState` (the app's state); every route but /health needs the API key when the server has one."""
from __future__ import annotations

import base64
import json
import time
import uuid

import anyio
import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .. import untrusted
from ..text.markup import MarkupError
from .encoders import MEDIA_TYPES, STREAMED, encoder
from .errors import ApiError, ErrorBody, param_of
from .job import SpeechJob
from .settings import ServerSettings
from .speech import MODEL_ALIASES, SpeechRequest, check_speed, parse, whole_take
from .state import ServerState
from .voices import NamedVoice, UnknownVoice

router = APIRouter()

SPEECH_BODY = {"requestBody": {"required": True,
                               "content": {"application/json": {"schema": SpeechRequest.model_json_schema()}}}}
ERRORS = {status: {"description": what, "model": ErrorBody} for status, what in (
    (400, "a bad field, named in param"), (401, "a missing or wrong API key"),
    (403, "a web page's Origin or a Host this server was not told of"), (404, "an unknown model or voice"),
    (408, "a body that did not arrive in time"), (413, "a body over the limit"), (415, "a body that is not JSON"),
    (422, "input whose markup cannot be read (line and column in the message)"),
    (429, "the queue is full (Retry-After)"), (503, "the model is loading"),
    (504, "the request ran over its time limit"))}
AUDIO = {**{t: {"schema": {"type": "string", "format": "binary"}} for t in MEDIA_TYPES.values()},
         "text/event-stream": {"schema": {"type": "string"}}}


def authorized(request: Request) -> ServerState:
    """The server's state, once the request's `Authorization: Bearer KEY` is checked."""
    state: ServerState = request.app.state
    scheme, _, key = request.headers.get("authorization", "").partition(" ")
    state.check_key(key.strip() if scheme.lower() == "bearer" else None)
    return state


async def read_json(request: Request, settings: ServerSettings) -> dict:
    """The body as a JSON object, read within the size and time limits (413, 408; 415, 400)."""
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


# ---- POST /v1/audio/speech ----------------------------------------------------------------------
class ClosingStreamingResponse(StreamingResponse):
    """A StreamingResponse that closes its body's generator however the response ends: a send that
    failed (the client read nothing for the send limit) leaves the generator waiting at a `yield`,
    where only a close runs its clean-up (the job cancelled, the slot freed)."""

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.body_iterator.aclose()


@router.post("/v1/audio/speech", openapi_extra=SPEECH_BODY, response_class=Response,
             responses={200: {"description": "the audio (or its SSE events)", "content": AUDIO}, **ERRORS})
async def speech(request: Request):
    state = authorized(request)
    req = parse(await read_json(request, state.settings))
    voice = speech_voice(state, req)
    state.admit()
    rid = "speech-" + uuid.uuid4().hex[:12]
    settings = state.settings
    job = SpeechJob(state.engine, req.input, voice, req.language, req.instructions,
                    req.sampling(state.engine, settings.max_frames), state.lexicon,
                    settings.streaming_text if req.streaming_text is None else req.streaming_text)
    first = await first_audio(state, job, rid)
    headers = {"x-request-id": rid}
    sse = req.stream_format == "sse"
    if req.speed != 1.0 or req.response_format not in STREAMED:
        return await whole_response(state, job, rid, first, req, headers)
    media = "text/event-stream" if sse else MEDIA_TYPES[req.response_format]
    return ClosingStreamingResponse(stream_body(state, job, rid, first, req.response_format, sse), media_type=media,
                                    headers=headers)


def speech_voice(state: ServerState, req: SpeechRequest) -> NamedVoice:
    """The request's voice, once its model, voice, speed and instructions are checked (404, 400)."""
    if req.model not in state.model_names:
        raise ApiError(404, f"unknown model {req.model!r}; this server has {state.settings.model_name!r} "
                            f"(also answers to {', '.join(MODEL_ALIASES)})", "model", "model_not_found")
    try:
        voice = state.voices.resolve(req.voice_name)
    except UnknownVoice as e:
        raise ApiError(404, e.message, "voice", "voice_not_found") from None
    check_speed(req.speed)
    state.check_instructions(req.instructions)
    return voice


async def first_audio(state: ServerState, job: SpeechJob, rid: str) -> np.ndarray | None:
    """The job started and its first audio; what the engine refuses is 400 (422 for markup)."""
    try:
        await anyio.to_thread.run_sync(job.start)
        return await anyio.to_thread.run_sync(job.next_audio)
    except (ValueError, MarkupError) as e:
        job.cancel()
        state.finish(job, rid, "invalid")
        if isinstance(e, MarkupError):   # well-formed JSON, a text that cannot be read: 422, where it goes wrong
            raise ApiError(422, str(e), "input", "invalid_markup") from None
        raise ApiError(400, str(e), param_of(str(e)), "invalid_value") from None
    except BaseException:
        job.cancel()
        state.finish(job, rid, "error")
        raise


def delta(data: bytes) -> bytes:
    event = {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}
    return f"data: {json.dumps(event)}\n\n".encode()


def done(state: ServerState, job: SpeechJob) -> bytes:
    tokens = state.engine.count_text_tokens(job.text)
    event = {"type": "speech.audio.done",
             "usage": {"input_tokens": tokens, "output_tokens": job.frames, "total_tokens": tokens + job.frames}}
    return f"data: {json.dumps(event)}\n\n".encode()


async def stream_body(state: ServerState, job: SpeechJob, rid: str, first: np.ndarray | None, fmt: str, sse: bool):
    """The take encoded as it is made (each piece an SSE event with `sse`), cut at the time limit."""
    enc = encoder(fmt, state.sample_rate)
    limit = state.settings.request_timeout_s
    outcome = "error"
    try:
        audio = first
        while audio is not None:
            data = enc.feed(audio)
            if data:
                yield delta(data) if sse else data
            if time.perf_counter() - job.started > limit:
                job.cancel()
                outcome = "timeout"
                break
            audio = await anyio.to_thread.run_sync(job.next_audio)
        tail = enc.finish()
        if tail:
            yield delta(tail) if sse else tail
        if sse:
            yield done(state, job)
        if outcome != "timeout":
            outcome = "ok"
    except (anyio.get_cancelled_exc_class(), GeneratorExit):   # (gone, or read nothing for the send limit)
        outcome = "disconnected"
        raise
    finally:
        job.cancel()
        state.finish(job, rid, outcome)


async def whole_response(state: ServerState, job: SpeechJob, rid: str, first: np.ndarray | None,
                         req: SpeechRequest, headers: dict) -> Response:
    """The whole take in one body: a format that does not stream (FLAC), or stretched (speed != 1)."""
    limit = state.settings.request_timeout_s
    try:
        parts = [] if first is None else [first]
        while True:
            if time.perf_counter() - job.started > limit:
                raise ApiError(504, f"the request ran over its time limit ({limit:.0f} s)", None, "timeout")
            audio = await anyio.to_thread.run_sync(job.next_audio)
            if audio is None:
                break
            parts.append(audio)
        take = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        data = await anyio.to_thread.run_sync(whole_take, req.response_format, take, state.sample_rate, req.speed)
    except ApiError:
        job.cancel()
        state.finish(job, rid, "timeout")
        raise
    except BaseException:
        job.cancel()
        state.finish(job, rid, "error")
        raise
    state.finish(job, rid, "ok")
    if req.stream_format == "sse":
        return Response(delta(data) + done(state, job), media_type="text/event-stream", headers=headers)
    return Response(data, media_type=MEDIA_TYPES[req.response_format], headers=headers)


# ---- what the server has -----------------------------------------------------------------------
@router.get("/v1/models", responses={401: ERRORS[401]})
async def models(request: Request):
    state = authorized(request)
    created = int(state.engine.info.path.stat().st_mtime)
    return {"object": "list", "data": [{"id": n, "object": "model", "created": created, "owned_by": "kazeia"}
                                       for n in state.model_names]}


@router.get("/v1/models/{model_id}", responses={401: ERRORS[401], 404: ERRORS[404]})
async def model(model_id: str, request: Request):
    state = authorized(request)
    if model_id not in state.model_names:
        raise ApiError(404, f"unknown model {model_id!r}", "model", "model_not_found")
    return {"id": model_id, "object": "model", "created": int(state.engine.info.path.stat().st_mtime),
            "owned_by": "kazeia"}


@router.get("/v1/audio/voices", responses={401: ERRORS[401]})
async def voice_list(request: Request):
    state = authorized(request)
    info = state.engine.info
    return {"model": state.settings.model_name, "variant": info.variant, "voices": state.voices.listing(),
            "languages": ["auto", *info.languages], "instructions": state.takes_instructions}


@router.get("/health")
async def health(request: Request):
    state: ServerState = request.app.state
    settings = state.settings
    return JSONResponse({"status": "ok", "model": settings.model_name, "requests": state.admission.admitted,
                         "max_batch": settings.max_batch, "max_queue": settings.max_queue})


@router.get("/metrics", responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}, 401: ERRORS[401]},
            response_class=Response)
async def prometheus(request: Request):
    metrics = authorized(request).metrics
    return Response(metrics.exposition(), media_type=metrics.content_type)
