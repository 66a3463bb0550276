"""Serving while the model loads: an ASGI app that answers 503 (OpenAI's error shape, Retry-After;
`/health` says "loading") until `load()`, run on a worker thread, has made the real app; from then on
it hands every request to that app, inside the app's own lifespan (its Wyoming server, its thread
limits). A load that fails answers 503 naming why and calls `on_failure` (the command stops)."""
from __future__ import annotations

import asyncio
from typing import Callable

import anyio
from fastapi import FastAPI
from fastapi.responses import JSONResponse

from .errors import error_body


class LoadingGate:
    def __init__(self, load: Callable[[], FastAPI], on_failure: Callable[[BaseException], None] | None = None):
        self._load, self._on_failure = load, on_failure
        self.app: FastAPI | None = None
        self.error: BaseException | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif self.app is not None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await self._unavailable(scope, receive, send)

    async def _unavailable(self, scope, receive, send) -> None:
        if self.error is not None:
            message, code = f"the model failed to load: {self.error}", "model_load_failed"
        else:
            message, code = "the model is loading; retry in a moment", "model_loading"
        body = {"status": "loading" if self.error is None else "failed", "message": message} \
            if scope["path"] == "/health" else error_body(503, message, None, code)
        await JSONResponse(body, status_code=503, headers={"Retry-After": "2"})(scope, receive, send)

    async def _lifespan(self, receive, send) -> None:
        await receive()   # lifespan.startup: the server listens at once; the model comes after
        stop = asyncio.Event()
        serving = asyncio.create_task(self._serve(stop))
        await send({"type": "lifespan.startup.complete"})
        await receive()   # lifespan.shutdown
        stop.set()
        await serving
        await send({"type": "lifespan.shutdown.complete"})

    async def _serve(self, stop: asyncio.Event) -> None:
        try:
            app = await anyio.to_thread.run_sync(self._load)
        except Exception as e:
            self.error = e
            if self._on_failure is not None:
                self._on_failure(e)
            return
        async with app.router.lifespan_context(app):
            self.app = app
            await stop.wait()
