"""Wyoming, the protocol Home Assistant speaks to local voice services: `describe` answers with the
voices (each with the model's languages as codes, "en", "de", ...), `synthesize` with `audio-start`,
16-bit 24 kHz `audio-chunk`s as they are made and `audio-stop`; a streamed text
(`synthesize-start`, `-chunk`s, `-stop`, what an LLM answer gives) is spoken while it arrives
(live.py: the audio of the whole text, bit for bit), then `synthesize-stopped`. The server's engine, voices and admission are the
HTTP app's: Wyoming requests share its batches and its limits. A request that cannot be spoken gets an
`error` event naming why; the connection stays open."""
from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time

import anyio
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncTcpServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from ..synthesis.requests import SamplingParams
from ..text.markup import MarkupError
from ..text.sentences import LANGUAGE_CODES
from .encoders import pcm16
from .job import SpeechJob
from .live import LiveJob, LiveService, Turns
from .speech import MAX_INPUT_CHARS
from .voices import UnknownVoice, VoiceBook
from .wyoming_events import EventError, read_event

log = logging.getLogger("kazeia.serve")

_ATTRIBUTION = Attribution(name="Kazeia", url="https://github.com/QwenLM/Qwen3-TTS")


class WyomingService:
    """What every connection's handler shares."""

    def __init__(self, live: LiveService, voices: VoiceBook):
        engine, settings = live.engine, live.settings
        self.live, self.engine, self.voices, self.admission, self.lexicon = live, engine, voices, live.admission, live.lexicon
        self.settings = settings   # (its frame cap and text feeding)
        model_name = settings.model_name
        self.on_finish = live.finish   # (job, request id, outcome): the server's log line and metrics
        self.rate = engine.info.sample_rate
        languages = [name for name in engine.info.languages if name in LANGUAGE_CODES]
        self.by_code = {LANGUAGE_CODES[name]: name for name in reversed(languages)}   # (a dialect never wins)
        codes = sorted({LANGUAGE_CODES[name] for name in languages})
        voices_info = [TtsVoice(name=v["id"], attribution=_ATTRIBUTION, installed=True,
                                description=v.get("instructions") or f"{model_name}: {v['kind']} {v['id']}",
                                version=None, languages=codes)
                       for v in voices.listing() if "maps_to" not in v]
        self.info = Info(tts=[TtsProgram(name="kazeia", attribution=_ATTRIBUTION, installed=True,
                                         description=f"Kazeia speech ({model_name})", version="1",
                                         voices=voices_info, supports_synthesize_streaming=True)])
        self.default_voice = voices_info[0].name if voices_info else None
        self.allowed = [ipaddress.ip_network(cidr, strict=False) for cidr in settings.wyoming_allow]

    def admits(self, peer: str) -> bool:
        """Whether a client at `peer` may connect: this machine, or a network the user listed (Wyoming
        carries no key: who may connect is the only guard)."""
        try:
            ip = ipaddress.ip_address(peer.split("%")[0])
        except ValueError:
            return False
        if ip.version == 6 and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return ip.is_loopback or any(ip in network for network in self.allowed)

    def language(self, code: str | None) -> str | None:
        """A Wyoming language ("en", "en_US", "de-DE") as the model's name for it."""
        if not code:
            return None
        return self.by_code.get(code.replace("-", "_").split("_")[0].lower())

    def handler(self, reader, writer) -> "WyomingHandler":
        return WyomingHandler(self, reader, writer)

    async def start(self, host: str, port: int) -> AsyncTcpServer:
        server = AsyncTcpServer(host, port)
        await server.start(self.handler)
        return server


class WyomingHandler(AsyncEventHandler):
    def __init__(self, service: WyomingService, reader, writer):
        super().__init__(reader, writer)
        self.service = service
        self._streaming = False               # between synthesize-start and -stop
        self._streamed: Turns | None = None   # that text's one turn (None: refused, the client was told)

    async def run(self) -> None:
        """The library's loop with the boundary's limits: peers checked on connect, every event read
        by wyoming_events (sizes, nesting, a time limit), every write bounded in time."""
        settings = self.service.settings
        peer = self.writer.get_extra_info("peername")
        try:
            if not self.service.admits(peer[0] if peer else ""):
                log.warning("wyoming: refused a client at %s (not in --wyoming-allow)", peer and peer[0])
                return
            while True:
                try:
                    event = await read_event(self.reader, settings.max_message_bytes, settings.read_timeout_s)
                except EventError as e:
                    with contextlib.suppress(Exception):
                        await self.write_event(Error(text=str(e), code="invalid_event").event())
                    return
                if event is None or not await self.handle_event(event):
                    return
        except (ConnectionError, asyncio.TimeoutError):
            pass   # (the client went away, or read nothing for the send limit)
        finally:
            await self.disconnect()
            self.writer.transport.abort()   # (not close: a client that reads nothing would keep it open)

    async def write_event(self, event: Event) -> None:
        """A write the client must read within the send limit (else ConnectionError: it is gone)."""
        try:
            await asyncio.wait_for(super().write_event(event), self.service.settings.send_timeout_s)
        except asyncio.TimeoutError:
            raise ConnectionError("the Wyoming client read nothing within the send limit") from None

    async def handle_event(self, event: Event) -> bool:
        try:
            return await self._handle(event)
        except (KeyError, TypeError, AttributeError, ValueError) as e:   # (a field missing or of the wrong type)
            await self.write_event(Error(text=f"{event.type}: a field is missing or of the wrong type "
                                              f"({type(e).__name__}: {e})"[:300], code="invalid_event").event())
            return True

    async def _handle(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(self.service.info.event())
        elif SynthesizeStart.is_type(event.type):
            await self._end_stream()   # (a start without a stop: the last one ends here)
            self._streaming = True
            self._streamed = await self._open_stream(Synthesize(text="", voice=SynthesizeStart.from_event(event).voice))
        elif SynthesizeChunk.is_type(event.type) and self._streamed is not None:
            text = SynthesizeChunk.from_event(event).text
            if not isinstance(text, str):
                raise TypeError("synthesize-chunk's text must be text")
            await self._streamed.write(text)
        elif SynthesizeStop.is_type(event.type) and self._streaming:
            await self._end_stream()
            self._streaming = False
            await self.write_event(SynthesizeStopped().event())
        elif Synthesize.is_type(event.type):
            if not self._streaming:   # (a streaming client sends the whole text too: spoken once)
                request = Synthesize.from_event(event)
                await self._speak(request.text, request)
        return True

    async def disconnect(self) -> None:
        if self._streamed is not None:
            await self._streamed.abandon()

    async def _open_stream(self, request: Synthesize) -> Turns | None:
        service = self.service
        try:
            voice = service.voices.resolve(self._voice_name(request))
        except UnknownVoice as e:
            await self.write_event(Error(text=e.message, code="voice_not_found").event())
            return None
        sampling = SamplingParams.from_model(service.engine.info, max_frames=service.settings.max_frames)
        return Turns(service.live, voice, self._language(request), None, sampling, _WyomingSink(self), prefix="wyoming")

    async def _end_stream(self) -> None:
        turns, self._streamed = self._streamed, None
        if turns is not None:
            await turns.drain()

    def _voice_name(self, request: Synthesize) -> str:
        wanted = request.voice.name if request.voice is not None and request.voice.name else self.service.default_voice
        return wanted or ""

    def _language(self, request: Synthesize) -> str | None:
        voice = request.voice
        return self.service.language(voice.language) if voice is not None else None

    async def _speak(self, text: str, request: Synthesize) -> None:
        service = self.service
        if not isinstance(text, str):
            raise TypeError("synthesize's text must be text")
        if len(text) > MAX_INPUT_CHARS:
            await self.write_event(Error(text=f"text: at most {MAX_INPUT_CHARS} characters (streamed text may be "
                                              "longer: synthesize-start, -chunk, -stop)", code="text_too_long").event())
            return
        try:
            voice = service.voices.resolve(self._voice_name(request))
        except UnknownVoice as e:
            await self.write_event(Error(text=e.message, code="voice_not_found").event())
            return
        if not service.admission.enter():
            await self.write_event(Error(text="the server is full; try again", code="server_busy").event())
            return
        sampling = SamplingParams.from_model(service.engine.info, max_frames=service.settings.max_frames)
        job = SpeechJob(service.engine, text, voice, self._language(request), sampling=sampling, lexicon=service.lexicon,
                        streaming_text=service.settings.streaming_text)
        rid, outcome = f"wyoming-{int(time.time() * 1000) % 10 ** 9}", "error"
        try:
            await anyio.to_thread.run_sync(job.start)
            audio = await anyio.to_thread.run_sync(job.next_audio)
            await self.write_event(AudioStart(rate=service.rate, width=2, channels=1).event())
            limit = service.settings.request_timeout_s
            while audio is not None:
                await self.write_event(AudioChunk(rate=service.rate, width=2, channels=1, audio=pcm16(audio)).event())
                if time.perf_counter() - job.started > limit:
                    job.cancel()
                    outcome = "timeout"
                    await self.write_event(Error(text=f"the request ran over its time limit ({limit:g} s)",
                                                 code="timeout").event())
                    break
                audio = await anyio.to_thread.run_sync(job.next_audio)
            await self.write_event(AudioStop().event())
            if outcome != "timeout":
                outcome = "ok"
        except (ValueError, MarkupError) as e:
            outcome = "invalid"
            await self.write_event(Error(text=str(e), code="invalid_request").event())
        except (ConnectionError, anyio.get_cancelled_exc_class()):
            outcome = "disconnected"
            raise
        finally:
            job.cancel()
            service.on_finish(job, rid, outcome)


class _WyomingSink:
    """A streamed text's turn as Wyoming events (live.TurnSink)."""

    def __init__(self, handler: WyomingHandler):
        self._handler, self._rate = handler, handler.service.rate

    async def start(self, turn: int) -> None:
        await self._handler.write_event(AudioStart(rate=self._rate, width=2, channels=1).event())

    async def audio(self, turn: int, audio) -> None:
        await self._handler.write_event(AudioChunk(rate=self._rate, width=2, channels=1, audio=pcm16(audio)).event())

    async def end(self, turn: int, outcome: str, job: LiveJob) -> None:
        await self._handler.write_event(AudioStop().event())

    async def error(self, code: str, message: str) -> None:
        await self._handler.write_event(Error(text=message, code=code).event())
