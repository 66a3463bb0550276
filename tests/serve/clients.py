"""The clients a test drives a server on loopback with, each giving the audio the server sent: Kazeia's
own live socket and the Deepgram-shaped one (the `websockets` client), Wyoming's (the `wyoming`
package's), the official `openai` client. Shared by tests/serve and tests/engine/test_one_request.py."""
from __future__ import annotations

import asyncio
import json
from urllib.parse import urlencode


def ws_url(server, path: str, **query) -> str:
    return server.url.replace("http", "ws") + path + ("?" + urlencode(query) if query else "")


async def turn_audio(ws) -> tuple[bytes, list[dict]]:
    """One turn's audio on Kazeia's socket and the JSON messages up to its end."""
    audio, messages = bytearray(), []
    while True:
        message = await asyncio.wait_for(ws.recv(), 120)
        if isinstance(message, bytes):
            audio += message
            continue
        messages.append(json.loads(message))
        if messages[-1]["type"] in ("turn.end", "error"):
            return bytes(audio), messages


async def live_turn(server, key: str, deltas: list[str], **query) -> tuple[bytes, list[dict]]:
    """One turn on Kazeia's `/v1/audio/speech/live`: `deltas` sent, then a flush; its audio and messages."""
    import websockets
    async with websockets.connect(ws_url(server, "/v1/audio/speech/live", **query),
                                  additional_headers={"Authorization": f"Bearer {key}"}) as ws:
        assert json.loads(await ws.recv())["type"] == "ready"
        for delta in deltas:
            await ws.send(json.dumps({"type": "text", "text": delta}))
        await ws.send(json.dumps({"type": "flush"}))
        return await turn_audio(ws)


async def deepgram_turn(server, key: str, deltas: list[str], **query) -> bytes:
    """One turn on the Deepgram-shaped `/v1/speak`: each delta a Speak, then a Flush; the audio up to Flushed."""
    import websockets
    async with websockets.connect(ws_url(server, "/v1/speak", **query),
                                  additional_headers={"Authorization": f"Token {key}"}) as ws:
        assert json.loads(await ws.recv())["type"] == "Metadata"
        for delta in deltas:
            await ws.send(json.dumps({"type": "Speak", "text": delta}))
        await ws.send(json.dumps({"type": "Flush"}))
        audio = bytearray()
        while True:
            message = await asyncio.wait_for(ws.recv(), 120)
            if isinstance(message, bytes):
                audio += message
            elif json.loads(message)["type"] == "Flushed":
                return bytes(audio)
            else:
                raise AssertionError(message)


async def wyoming_until(client, kind) -> list:
    """Wyoming events up to the first whose type `kind` accepts, or an error (that one included)."""
    from wyoming.error import Error
    events = []
    while True:
        event = await asyncio.wait_for(client.read_event(), 60)
        assert event is not None, "the server closed the connection"
        events.append(event)
        if kind(event.type) or Error.is_type(event.type):
            return events


def wyoming_audio(events) -> bytes:
    from wyoming.audio import AudioChunk
    return b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))


async def wyoming_speech(port: int, voice: str, text: str, deltas: list[str] | None = None) -> bytes:
    """`text` spoken by a Wyoming server on loopback: one Synthesize, or (`deltas`) streamed as
    synthesize-start, its chunks, the whole text (as streaming clients send it) and synthesize-stop."""
    from wyoming.audio import AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped, \
        SynthesizeVoice
    async with AsyncTcpClient("127.0.0.1", port) as client:
        if deltas is None:
            await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
            return wyoming_audio(await wyoming_until(client, AudioStop.is_type))
        await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name=voice)).event())
        for delta in deltas:
            await client.write_event(SynthesizeChunk(text=delta).event())
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        await client.write_event(SynthesizeStop().event())
        return wyoming_audio(await wyoming_until(client, SynthesizeStopped.is_type))


def openai_client(server, key: str):
    """The official client, pointed at the server (no retries: every answer is the server's own)."""
    import openai
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, timeout=120)
