"""What every live socket protocol shares (sockets.py has the protocols): the handshake (the key, the
query, the voice, the protocol's own checks, a free slot; a refusal is an HTTP answer where the
server can send one), then one message loop: each JSON message handed to the protocol's handler for
its type, a bad message answered and the socket kept, the idle limit while a turn is open, and every
turn cancelled and its slot freed however the conversation ends."""
from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Awaitable, Callable

from fastapi import WebSocket
from fastapi.responses import JSONResponse
from starlette.websockets import WebSocketDisconnect, WebSocketState

from .. import untrusted
from .errors import ApiError, error_body
from .live import Turns, TurnSink, run_idle_watch
from .speech import SamplingFields, parse
from .voices import UnknownVoice

if TYPE_CHECKING:
    from .state import ServerState

MESSAGE_DEPTH = 4   # a message is one flat object ({"type": "text", "text": ...}); nothing needs more


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


class SocketEndpoint:
    """One connection of a live socket protocol. A protocol says its query (`query_type`, whose
    `voice_param` names the voice), its own `check` of it, the `sink` its turns are sent through,
    its `greeting`, its turns' instructions and hold (`open_turns`), and `handlers`: a message type -> the method that answers it (returning False:
    the conversation ends). Messages of another type get `unknown_code`; an open turn idle for the
    server's limit gets `idle_code`, is spoken, and the socket closes."""
    query_type: type[SamplingFields]
    voice_param: str
    turn_prefix: str        # (the request ids of its turns, in the log)
    idle_code: str
    unknown_code: str
    handlers: dict[str, Callable[["SocketEndpoint", dict], Awaitable["bool | None"]]]

    def __init__(self, ws: WebSocket, state: "ServerState"):
        self.ws, self.state, self.settings = ws, state, state.settings
        self.send = Sender(ws)
        self.query = self.voice = self.sink = self.turns = None

    # ---- what a protocol says
    def check(self, query) -> None:
        """ApiError for a query the protocol cannot serve (its fields are valid one by one)."""

    def make_sink(self) -> TurnSink:
        raise NotImplementedError

    def open_turns(self, instruct: str | None = None, hold_ms: float = 0.0) -> Turns:
        """The connection's turns, in its voice, language and sampling."""
        query = self.query
        return Turns(self.state.live, self.voice, query.language, instruct,
                     query.sampling(self.state.engine, self.settings.max_frames), self.sink, prefix=self.turn_prefix,
                     hold_ms=hold_ms)

    def greeting(self) -> dict:
        raise NotImplementedError

    # ---- the conversation
    async def serve(self) -> None:
        """The handshake, then messages until the client closes, goes away or idles."""
        if not await self._accepted():
            return
        self.sink = self.make_sink()
        self.turns = self.open_turns()
        await self.send.json(self.greeting())
        await self._converse()

    async def _accepted(self) -> bool:
        """Whether the handshake was accepted (else the client was answered why not)."""
        key, subprotocol = given_key(self.ws)
        state = self.state
        try:
            state.check_key(key)
            query = parse(dict(self.ws.query_params), self.query_type)
            try:
                voice = state.voices.resolve(getattr(query, self.voice_param))
            except UnknownVoice as e:
                raise ApiError(404, e.message, self.voice_param, "voice_not_found") from None
            self.check(query)
            state.check_room()
        except ApiError as e:
            await deny(self.ws, e)
            return False
        await self.ws.accept(subprotocol=subprotocol)
        self.query, self.voice = query, voice
        return True

    async def end(self, reason: str) -> None:
        """Every turn spoken to its end, then the socket closes."""
        await self.turns.drain()
        await self.send.close(1000, reason)

    async def close_by_client(self, data: dict) -> bool:
        await self.end("closed by the client")
        return False

    async def _on_idle(self) -> None:
        await self.sink.error(self.idle_code, f"no message for {self.settings.idle_timeout_s:g} s: what was sent "
                                              "is spoken, then the socket closes")
        await self.end("idle")

    async def _converse(self) -> None:
        """Reads the client's messages until it closes, goes away or idles; every turn ends with it."""
        watch = asyncio.create_task(run_idle_watch(self.turns, self.settings.idle_timeout_s, self._on_idle))
        try:
            while True:
                try:
                    message = await self.ws.receive()
                except (RuntimeError, WebSocketDisconnect):
                    message = {"type": "websocket.disconnect"}
                if message["type"] == "websocket.disconnect":
                    return
                data = await self._message(message)
                if data is not None and await self._dispatch(data) is False:
                    return
        finally:
            # whatever ended the conversation (a close, a client gone, a handler that raised): every
            # turn it holds is cancelled and its slot freed (after a close or idle end: all sent already)
            watch.cancel()
            await asyncio.shield(self.turns.abandon())

    async def _message(self, message: dict) -> dict | None:
        """The message as a JSON object with a "type", else None (the client was told why)."""
        if message.get("text") is None:
            await self.sink.error("binary_not_accepted", "send JSON text messages; audio only goes out")
            return None
        try:
            data = untrusted.loads(message["text"], "the message", self.settings.max_message_bytes,
                                   max_depth=MESSAGE_DEPTH)
            if not isinstance(data, dict) or not isinstance(data.get("type"), str):
                raise untrusted.InputError("the message: a JSON object with a \"type\" is needed")
        except untrusted.InputError as e:
            await self.sink.error("invalid_json", str(e))
            return None
        return data

    async def _dispatch(self, data: dict) -> bool | None:
        kind = data["type"]
        handler = self.handlers.get(kind)
        if handler is None:
            *others, last = self.handlers
            await self.sink.error(self.unknown_code, f"unknown message type {kind!r}: {', '.join(others)} or {last}")
            return None
        return await handler(self, data)
