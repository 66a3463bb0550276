"""Wyoming events read from a client as hostile: the wyoming library's reader trusts what a header
declares (`data_length`, `payload_length`: it reads that many bytes, however many), parses JSON
that may nest without bound and waits for ever. This one reads the same wire format (a JSON line,
then `data_length` bytes of JSON, then `payload_length` bytes) with every size capped before it is
read, JSON parsed by untrusted.loads, and the whole event due within a time limit (a client that
sends a byte a second is dropped when it runs out)."""
from __future__ import annotations

import asyncio

from wyoming.event import Event

from .. import untrusted

MAX_PAYLOAD_BYTES = 64 * 1024   # a speech server takes no audio: no event it reads carries a payload
EVENT_DEPTH = 8                 # Kazeia's events nest 3 deep (synthesize: data.voice.name)


class EventError(Exception):
    """An event that cannot be read; the connection is closed after the client is told why."""


async def read_event(reader: asyncio.StreamReader, max_bytes: int, timeout_s: float) -> Event | None:
    """The next event, None at the end of the stream; EventError for one over a limit, malformed,
    or not whole within `timeout_s`."""
    try:
        return await asyncio.wait_for(_read(reader, max_bytes), timeout_s)
    except asyncio.TimeoutError:
        raise EventError(f"no whole event within {timeout_s:g} s; the connection is closed") from None
    except untrusted.InputError as e:
        raise EventError(str(e)) from None


async def _read(reader: asyncio.StreamReader, max_bytes: int) -> Event | None:
    try:   # (the reader's own limit, 64 KiB, bounds what it buffers while no newline comes)
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as e:
        if e.partial:
            raise EventError("the connection ended inside an event's header") from None
        return None
    except asyncio.LimitOverrunError:
        raise EventError(f"an event's header is over {max_bytes} bytes") from None
    if len(line) > max_bytes:
        raise EventError(f"an event's header is over {max_bytes} bytes")
    header = untrusted.loads(line, "the event's header", max_bytes, max_depth=EVENT_DEPTH)
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise EventError("an event's header must be a JSON object with a \"type\"")
    data = header.get("data") or {}
    if not isinstance(data, dict):
        raise EventError("an event's data must be a JSON object")
    data_length = _length(header, "data_length", max_bytes)
    if data_length:
        more = untrusted.loads(await _exactly(reader, data_length), "the event's data", max_bytes,
                               max_depth=EVENT_DEPTH)
        if not isinstance(more, dict):
            raise EventError("an event's data must be a JSON object")
        data.update(more)
    payload_length = _length(header, "payload_length", MAX_PAYLOAD_BYTES)
    payload = await _exactly(reader, payload_length) if payload_length else None
    return Event(type=header["type"], data=data, payload=payload)


def _length(header: dict, name: str, limit: int) -> int:
    value = header.get(name)
    if value is None:
        return 0
    try:
        return untrusted.bounded(f"the event's {name}", value, 0, limit, integer=True)
    except untrusted.InputError as e:
        raise EventError(str(e)) from None


async def _exactly(reader: asyncio.StreamReader, n: int) -> bytes:
    try:
        return await reader.readexactly(n)
    except asyncio.IncompleteReadError:
        raise EventError("the connection ended inside an event") from None
