"""The server's edge, for HTTP and WebSockets alike (one ASGI middleware): a request from a web page
(it carries `Origin`) is served only when that page is on this machine (http(s)://localhost,
127.0.0.1 or [::1], any port) or one the user listed (--cors-origin); a request whose `Host` is a
name the server was not told of is refused (DNS rebinding: a page of evil.example whose name now
points at 127.0.0.1 sends `Host: evil.example`). Both answer 403 naming why. A client without
`Origin` (a program, not a browser) is served.

It also bounds what a client may make the server wait for: a send the client does not read within
`send_timeout_s` ends the request (its slot freed by the handler's own clean-up), and on a
WebSocket whose send timed out every later receive says the client is gone."""
from __future__ import annotations

import asyncio
import ipaddress
import json
from typing import Iterable

from .errors import error_body

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class SendTimeout(Exception):
    """A client read nothing for the send time limit."""


def _host_part(value: str) -> str:
    """`Host`'s (or an origin's authority's) host, without the port and IPv6 brackets, lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _ip(host: str):
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class Boundary:
    """Which Origins and Hosts a server takes. `listen_host`: the address it is bound to (a wildcard,
    0.0.0.0 or ::, lets any IP-literal Host in: rebinding needs a name); `allowed_hosts`: more names
    (--allowed-host); `origins`: more web pages (--cors-origin; "*" lets any page in)."""

    def __init__(self, listen_host: str = "127.0.0.1", allowed_hosts: Iterable[str] = (),
                 origins: Iterable[str] = ()):
        self.listen_host = _host_part(listen_host) if listen_host.startswith("[") else listen_host.lower()
        self.names = {*LOOPBACK_NAMES, self.listen_host, *(h.lower() for h in allowed_hosts)}
        self.origins = {o.rstrip("/").lower() for o in origins}
        wildcard = _ip(self.listen_host)
        self.any_ip = wildcard is not None and wildcard.is_unspecified

    def host_refusal(self, host: str | None) -> str | None:
        if host is None:   # (HTTP/1.0: no Host; no browser sends that)
            return None
        name = _host_part(host)
        if name in self.names:
            return None
        ip = _ip(name)
        if ip is not None and (ip.is_loopback or self.any_ip):
            return None
        return (f"Host {host!r} is not a name this server answers to (DNS rebinding guard); "
                "start it with --allowed-host NAME to add one")

    def origin_refusal(self, origin: str | None) -> str | None:
        if origin is None or "*" in self.origins:
            return None
        value = origin.strip().rstrip("/").lower()
        if value in self.origins:
            return None
        scheme, sep, authority = value.partition("://")
        if sep and scheme in ("http", "https") and "/" not in authority:
            host = _host_part(authority)
            ip = _ip(host)
            if host == "localhost" or (ip is not None and ip.is_loopback):
                return None
        return (f"Origin {origin!r}: web pages from there may not call this server; start it with "
                "--cors-origin ORIGIN to let them")


def _headers(scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        key = name.decode("latin-1").lower()
        if key in ("host", "origin") and key not in found:
            found[key] = value.decode("latin-1")
    return found


class BoundaryMiddleware:
    """ASGI: `Boundary`'s checks on every http and websocket scope, and the send time limit."""

    def __init__(self, app, boundary: Boundary, send_timeout_s: float):
        self.app, self.boundary, self.send_timeout_s = app, boundary, send_timeout_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        why = self.boundary.host_refusal(headers.get("host")) or self.boundary.origin_refusal(headers.get("origin"))
        if why is not None:
            await _forbid(scope, receive, send, why)
            return
        gone = asyncio.Event()

        async def timed_send(message) -> None:
            if gone.is_set():
                raise SendTimeout("the client stopped reading")
            try:
                await asyncio.wait_for(send(message), self.send_timeout_s)
            except asyncio.TimeoutError:
                gone.set()
                raise SendTimeout(f"the client read nothing for {self.send_timeout_s:g} s") from None

        async def watched_receive():
            if scope["type"] != "websocket":
                return await receive()
            if gone.is_set():
                return {"type": "websocket.disconnect", "code": 1006}
            waiting, dropped = asyncio.ensure_future(receive()), asyncio.ensure_future(gone.wait())
            try:
                await asyncio.wait({waiting, dropped}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                dropped.cancel()
                if not waiting.done():
                    waiting.cancel()
            if waiting.done() and not waiting.cancelled():
                return waiting.result()
            return {"type": "websocket.disconnect", "code": 1006}

        try:
            await self.app(scope, watched_receive, timed_send)
        except SendTimeout:
            pass   # (the handler has let go of what it held; the server closes the connection)
        except BaseExceptionGroup as group:   # (raised inside a task group: a streamed response)
            rest = group.subgroup(lambda e: not isinstance(e, SendTimeout))
            if rest is not None:
                raise rest from None


async def _forbid(scope, receive, send, why: str) -> None:
    body = json.dumps(error_body(403, why, "origin" if why.startswith("Origin") else "host", "forbidden")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 403, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    await receive()   # websocket.connect
    if "websocket.http.response" in scope.get("extensions", {}):
        await send({"type": "websocket.http.response.start", "status": 403, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008, "reason": why[:120]})
