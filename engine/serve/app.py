"""The HTTP app: OpenAI's `POST /v1/audio/speech` over the batched engine, and `GET /v1/models`,
`/v1/audio/voices`, `/health`, `/metrics` (http_api.py); the live sockets (sockets.py); with a Wyoming
port, Home Assistant's protocol beside it on the same engine, voices and limits (wyoming_tts.py).
Every request is a session of the engine's batcher, so concurrent requests share each talker and
code-predictor step; beyond `max_batch` running and `max_queue` waiting a request gets 429 with
Retry-After. A client that goes away mid-stream cancels its session within a frame. One log line per
request. `create_app` only assembles: the server's state (state.py), the edge, the routes, the lifespan."""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Callable

import anyio
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import http_api, sockets
from .boundary import Boundary, BoundaryMiddleware
from .errors import ApiError, api_error_handler, http_error_handler
from .settings import ServerSettings
from .state import ServerState
from .voices import VoiceBook

if TYPE_CHECKING:
    from ..synthesis.engine import Engine

def create_app(engine: "Engine", voices: VoiceBook, settings: ServerSettings, lexicon=None,
               observer: Callable[[dict], None] | None = None) -> FastAPI:
    """`observer`: called (on the server's thread) with each finished request's log record (the
    workbench's Serve panel lists them)."""
    app = FastAPI(title="Kazeia speech server", version="1", description="OpenAI-compatible speech on Kazeia's engine",
                  lifespan=lifespan)
    app.state = ServerState(engine, voices, settings, lexicon, observer)   # (what every route reads, typed)
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
    app.include_router(sockets.router)
    app.include_router(http_api.router)
    return app


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI):
    """Room on the worker threads for every admitted request; the Wyoming server, if asked for."""
    state: ServerState = app.state
    limiter = anyio.to_thread.current_default_thread_limiter()   # each admitted request may wait in one
    limiter.total_tokens = max(limiter.total_tokens, state.admission.limit + 8)
    if state.settings.wyoming is None:
        yield
        return
    from .wyoming_tts import WyomingService
    service = WyomingService(state.live, state.voices)
    wyoming = await service.start(*state.settings.wyoming)
    try:
        yield
    finally:
        await wyoming.stop()
