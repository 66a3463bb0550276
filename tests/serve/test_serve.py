"""The speech server on loopback, driven by the official `openai` client (and httpx where a client
would not send what is tested): every response format decodes to the engine's own audio, streaming
and SSE, continuous batching, OpenAI-shaped errors, the queue limit, a client that leaves mid-stream,
and SIGTERM. Servers run on 127.0.0.1 only, every wait is bounded."""
from __future__ import annotations

import base64
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
import httpx2 as httpx  # noqa: E402  (the HTTP client the openai package itself uses)
import openai  # noqa: E402
import soundfile  # noqa: E402
import uvicorn  # noqa: E402

from kazeia.engine import Engine, Request, SamplingParams  # noqa: E402
from kazeia.engine.serve.app import ServerSettings, create_app  # noqa: E402
from kazeia.engine.serve.encoders import encoder, pcm16  # noqa: E402
from kazeia.engine.bench.load_clients import clients  # noqa: E402
from kazeia.engine.serve.local import LocalServer, free_port  # noqa: E402
from kazeia.engine.serve.voices import VoiceBook  # noqa: E402
from kazeia.engine.synthesis.requests import ONE_PROMPT  # noqa: E402
from serve.clients import openai_client, wyoming_audio, wyoming_until  # noqa: E402

KEY = "test-key"
TEXT = "Hello from the server."


class Running(LocalServer):
    """A server of `app` on a loopback port, in a thread of this process, with the official client."""

    def client(self, key: str = KEY) -> openai.OpenAI:
        return openai_client(self, key)


@pytest.fixture(scope="module")
def engine():
    from kazeia.engine import demo_model_path
    return Engine.load(demo_model_path(), threads=2, max_batch=4)


@pytest.fixture(scope="module")
def server(engine):
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("demo", api_key=KEY, max_batch=4, max_queue=4))
    running = Running(app)
    yield running
    running.stop()


def engine_audio(engine, text=TEXT, speaker="serena", frames=6, seed=0, streaming_text=True) -> np.ndarray:
    """What the engine says; the server feeds text while generating unless told otherwise."""
    sampling = SamplingParams.from_model(engine.info, max_frames=frames, seed=seed)
    return engine.take(Request(text, speaker=speaker, sampling=sampling, streaming_text=streaming_text)).audio


def speech(client, fmt="pcm", text=TEXT, voice="alloy", frames=6, **extra) -> bytes:
    return client.audio.speech.create(model="tts-1", voice=voice, input=text, response_format=fmt,
                                      extra_body={"max_frames": frames, **extra}).content


def test_every_format_is_the_engines_audio(server, engine):
    expected = engine_audio(engine)   # "alloy" is the model's first speaker
    client = server.client()
    pcm = np.frombuffer(speech(client, "pcm"), "<i2")
    np.testing.assert_array_equal(pcm, np.frombuffer(pcm16(expected), "<i2"))
    for fmt in ("wav", "flac"):   # lossless: the same 16-bit samples
        audio, rate = soundfile.read(io.BytesIO(speech(client, fmt)), dtype="int16")
        assert rate == 24000
        np.testing.assert_array_equal(audio, pcm)
    import av

    def decode(data: bytes) -> tuple[np.ndarray, int]:
        with av.open(io.BytesIO(data)) as container:
            samples = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
            return samples, container.streams.audio[0].codec_context.sample_rate
    for fmt in ("mp3", "opus", "aac"):   # lossy: what that encoder makes of the engine's audio
        decoded, rate = decode(speech(client, fmt))
        whole = encoder(fmt, 24000)
        np.testing.assert_array_equal(decoded, decode(whole.feed(expected) + whole.finish())[0])   # (fed frame by frame)
        if rate == 48000:   # (an Ogg Opus decoder speaks at 48 kHz)
            decoded = decoded[::2]
        assert abs(len(decoded) - len(expected)) <= 2400, fmt   # the encoder's priming and padding
        rms = lambda x: float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))  # noqa: E731
        assert 0.5 < rms(decoded) / rms(expected) < 1.5, fmt


def test_text_fed_while_generating_unless_the_request_or_server_says_whole(engine):
    """The server's default prompt is the model's streaming one (text fed frame by frame, ~10 rows);
    `streaming_text: false` (per request) or ServerSettings(streaming_text=False) (--no-streaming-text)
    puts the whole text in the prompt, as the reference wrapper does for CustomVoice."""
    fed, whole = (pcm16(engine_audio(engine, frames=8, streaming_text=s)) for s in (True, False))
    assert fed != whole   # different prompts: different audio
    for server_feeds in (True, False):
        app = create_app(engine, VoiceBook(engine.model), ServerSettings("demo", streaming_text=server_feeds))
        with Running(app) as running:
            client = running.client()
            assert speech(client, frames=8) == (fed if server_feeds else whole)
            for asked in (True, False):
                assert speech(client, frames=8, streaming_text=asked) == (fed if asked else whole)
            with pytest.raises(openai.BadRequestError) as e:
                speech(client, frames=8, streaming_text="sometimes")
            assert e.value.body["param"] == "streaming_text"
    # the prompt is shorter, so is the prefill (the reason it is the default)
    plans = [engine.prompts.build(TEXT * 4, speaker="serena", streaming_text=s) for s in (True, False)]
    assert len(plans[0]) < len(plans[1]) / 2


def test_sse_and_streamed_audio_arrive_in_pieces(server, engine):
    expected = pcm16(engine_audio(engine, frames=24))
    client = server.client()
    with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="pcm",
            extra_body={"max_frames": 24, "stream_format": "sse"}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) > 3 and events[-1]["type"] == "speech.audio.done"
    assert events[-1]["usage"]["output_tokens"] == 24
    assert b"".join(base64.b64decode(d["audio"]) for d in deltas) == expected
    with client.audio.speech.with_streaming_response.create(
            model="tts-1", voice="alloy", input=TEXT, response_format="wav", extra_body={"max_frames": 24}) as response:
        body = b"".join(response.iter_bytes())
    assert body[:4] == b"RIFF" and body[44:] == expected


def test_concurrent_requests_share_batches_and_each_is_its_own(server, engine):
    texts = ["First of three.", "The second one, a bit longer.", "Third."]
    expected = [pcm16(engine_audio(engine, t, frames=30, seed=i)) for i, t in enumerate(texts)]
    steps_before = engine.shared_batcher.steps
    got: dict[int, bytes] = {}

    def ask(i: int) -> None:
        got[i] = speech(server.client(), "pcm", texts[i], frames=30, seed=i)
    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [got.get(i) == expected[i] for i in range(3)] == [True] * 3
    assert engine.shared_batcher.largest_batch >= 2
    assert engine.shared_batcher.steps - steps_before < 3 * 30   # steps were shared


def test_errors_are_openai_shaped_and_name_the_field(server):
    client = server.client()
    with pytest.raises(openai.NotFoundError) as e:
        client.audio.speech.create(model="whisper-9", voice="alloy", input="Hi.")
    assert e.value.body["param"] == "model" and "unknown model 'whisper-9'" in e.value.body["message"]
    with pytest.raises(openai.NotFoundError) as e:
        client.audio.speech.create(model="tts-1", voice="nobody", input="Hi.")
    assert e.value.body["param"] == "voice" and "serena" in e.value.body["message"]
    for body, param in [({"speed": 9}, "speed"), ({"response_format": "ogg"}, "response_format"),
                        ({"temperature": 0}, "temperature"), ({"colour": "red"}, "colour")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", extra_body=body)
        assert e.value.body["param"] == param, body
    for text, where in [("x" * 4097, "input"), ("   ", "input")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.audio.speech.create(model="tts-1", voice="alloy", input=text)
        assert where in e.value.body["param"] + e.value.body["message"]
    with pytest.raises(openai.UnprocessableEntityError) as e:   # valid JSON, markup that cannot be read
        client.audio.speech.create(model="tts-1", voice="alloy", input="Fine.\nThen [pause:forever] here.")
    assert e.value.body["param"] == "input" and "line 2, column 6" in e.value.body["message"]
    assert e.value.body["code"] == "invalid_markup"
    with pytest.raises(openai.AuthenticationError) as e:
        server.client("wrong").audio.speech.create(model="tts-1", voice="alloy", input="Hi.")
    assert e.value.body["code"] == "invalid_api_key"
    auth = {"Authorization": f"Bearer {KEY}"}
    r = httpx.post(server.url + "/v1/audio/speech", content=b"input=hi", headers=auth)
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
    r = httpx.post(server.url + "/v1/audio/speech", content=b"{" + b" " * (2 << 20) + b"}",
                   headers={**auth, "content-type": "application/json"})
    assert r.status_code == 413
    r = httpx.post(server.url + "/v1/audio/speech", content=b"{not json", headers={**auth, "content-type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    assert httpx.get(server.url + "/v1/nothing", headers=auth).json()["error"]["code"] == "not_found"


def test_models_voices_health_metrics(server):
    client = server.client()
    speech(client, "pcm", frames=2)
    ids = [m.id for m in client.models.list()]
    assert ids[0] == "demo" and "tts-1" in ids and "gpt-4o-mini-tts" in ids
    auth = {"Authorization": f"Bearer {KEY}"}
    voices = httpx.get(server.url + "/v1/audio/voices", headers=auth).json()
    by_id = {v["id"]: v for v in voices["voices"]}
    assert by_id["serena"]["kind"] == "speaker" and by_id["alloy"]["maps_to"] == "serena"
    assert "english" in voices["languages"]
    assert httpx.get(server.url + "/health").json()["status"] == "ok"   # (no key needed)
    assert httpx.get(server.url + "/metrics").status_code == 401
    text = httpx.get(server.url + "/metrics", headers=auth).text
    assert 'kazeia_requests_total{outcome="ok"}' in text and "kazeia_ttfa_seconds_bucket" in text
    schema = httpx.get(server.url + "/openapi.json").json()
    assert "/v1/audio/speech" in schema["paths"]


def test_a_long_marked_up_input_is_one_take_of_its_chunks(server, engine):
    text = "One sentence here. [pause:200ms] Another one there."
    sampling = SamplingParams.from_model(engine.info, max_frames=4)
    take = engine.take(Request(text, speaker="serena", sampling=sampling, streaming_text=True))
    pcm = speech(server.client(), "pcm", text, frames=4)
    assert pcm == pcm16(take.audio) and len(take.chunks) == 2


@pytest.mark.skipif(shutil.which("rubberband") is None, reason="Rubber Band (rubberband-cli) is not installed")
def test_speed_stretches_the_take_keeping_its_pitch(server, engine):
    normal = engine_audio(engine, frames=30)
    fast, rate = soundfile.read(io.BytesIO(speech(server.client(), "wav", frames=30, speed=2.0)), dtype="float32")
    assert abs(len(fast) - len(normal) / 2) < 0.05 * len(normal)

    def centroid_hz(x: np.ndarray) -> float:   # (the demo model's speech is noise: no single peak to follow)
        power = np.square(np.abs(np.fft.rfft(x * np.hanning(len(x)))))[1:]
        return float(np.sum(power * np.arange(1, len(power) + 1)) / np.sum(power) * rate / len(x))
    # pitch kept: the spectrum stays where it was (a plain resampling would double its centroid)
    assert abs(centroid_hz(fast) - centroid_hz(normal)) < 0.15 * centroid_hz(normal)


def test_the_queue_is_bounded_and_a_leaving_client_frees_its_slot(engine):
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("demo", max_batch=1, max_queue=0))
    running = Running(app)
    try:
        client = running.client("none")
        with client.audio.speech.with_streaming_response.create(
                model="tts-1", voice="alloy", input=TEXT, response_format="pcm",
                extra_body={"max_frames": 2000}) as long:
            parts = long.iter_bytes()   # (kept: a dropped iterator closes the response, and the server frees the slot)
            first = next(parts)
            assert first
            with pytest.raises(openai.RateLimitError) as e:
                client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.")
            assert int(e.value.response.headers["retry-after"]) >= 1
        # the client has gone (the response closed mid-stream): its session ends within a few frames
        deadline = time.time() + 30
        while app.state.admission.admitted:
            assert time.time() < deadline, "the session was not cancelled"
            time.sleep(0.05)
        metrics = httpx.get(running.url + "/metrics").text
        assert 'kazeia_requests_total{outcome="disconnected"} 1.0' in metrics
        assert 'kazeia_requests_total{outcome="rejected"} 1.0' in metrics
        assert len(speech(client, "pcm", frames=3)) == 3 * 1920 * 2   # and the slot is free again
    finally:
        running.stop()


def start_serve(port: int, *args: str, env=None) -> subprocess.Popen:
    """`kazeia serve --model demo` on `port`, once its /health says it is ready."""
    proc = subprocess.Popen([sys.executable, "-m", "kazeia.engine", "serve", "--model", "demo", "--port", str(port),
                             *args], stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 60
    while True:
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"the server did not start: {proc.stderr.read()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)


def test_serve_command_starts_and_stops_on_sigterm(tmp_path):
    port = free_port()
    env = {**os.environ, "KAZEIA_API_KEY": ""}
    r = subprocess.run([sys.executable, "-m", "kazeia.engine", "serve", "--model", "demo", "--host", "0.0.0.0"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 2 and "listens beyond this machine" in r.stderr
    for args, says in [(["--model", tmp_path / "none.gguf"], "none.gguf"),
                       (["--model", "demo", "--wyoming", "10200"], "give tcp://HOST:PORT"),
                       (["--model", "demo", "--voice-map", "alloy=nobody"], "no speaker or voice profile 'nobody'")]:
        r = subprocess.run([sys.executable, "-m", "kazeia.engine", "serve", "--port", str(port), *map(str, args)],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
    proc = start_serve(port, "--name", "mine", env=env)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        audio = client.audio.speech.create(model="mine", voice="vivian", input="Hi.", response_format="pcm",
                                           extra_body={"max_frames": 3}).content
        assert len(audio) == 3 * 1920 * 2
        # SIGTERM during a stream: no new connections, the stream ends whole, exit 0
        with client.audio.speech.with_streaming_response.create(
                model="mine", voice="vivian", input="A longer one.", response_format="pcm",
                extra_body={"max_frames": 150}) as response:
            parts = response.iter_bytes()
            got = next(parts)
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            with pytest.raises(httpx.TransportError):
                httpx.get(f"http://127.0.0.1:{port}/health")
            got += b"".join(parts)
        assert len(got) == 150 * 1920 * 2
        assert proc.wait(30) == 0
        log = proc.stderr.read()
        assert "on http://127.0.0.1:" in log and "voice=vivian chars=3 frames=3" in log and "outcome=ok" in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_wyoming_describe_synthesize_and_streamed_text(engine):
    import asyncio

    from wyoming.audio import AudioStart, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.info import Describe, Info
    from wyoming.tts import (Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped,
                             SynthesizeVoice)
    port = free_port()
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("demo", wyoming=("127.0.0.1", port)))
    running = Running(app)

    async def talk():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            info = Info.from_event((await wyoming_until(client, Info.is_type))[-1])
            program = info.tts[0]
            assert program.supports_synthesize_streaming
            names = [v.name for v in program.voices]
            assert names[0] == "serena" and "alloy" not in names and "en" in program.voices[0].languages
            # one text: audio-start, chunks as made, audio-stop; the engine's own samples
            await client.write_event(Synthesize(text="Hello there.", voice=SynthesizeVoice(name="vivian")).event())
            events = await wyoming_until(client, AudioStop.is_type)
            start = AudioStart.from_event(events[0])
            assert (start.rate, start.width, start.channels) == (24000, 2, 1)
            sampling = SamplingParams.from_model(engine.info)
            expected = engine.take(Request("Hello there.", speaker="vivian", sampling=sampling,
                                           streaming_text=True)).audio
            assert wyoming_audio(events) == pcm16(expected)
            # an unknown voice: an error event, and the connection goes on
            await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody")).event())
            error = Error.from_event((await wyoming_until(client, lambda t: False))[-1])
            assert error.code == "voice_not_found" and "serena" in error.text
            # a streamed text is one utterance spoken while it arrives: the whole text's audio
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="ryan")).event())
            for piece in ("The first sentence", " is here. The sec", "ond one follows."):
                await client.write_event(SynthesizeChunk(text=piece).event())
            first = await wyoming_until(client, AudioStart.is_type)   # (before the stream is over)
            await client.write_event(Synthesize(text="The first sentence is here. The second one follows.").event())
            await client.write_event(SynthesizeStop().event())
            events = first + await wyoming_until(client, SynthesizeStopped.is_type)
            assert sum(AudioStop.is_type(e.type) for e in events) == 1   # (the whole text sent too: not spoken twice)
            whole = engine.open_take(Request("The first sentence is here. The second one follows.", speaker="ryan",
                                             sampling=sampling, streaming_text=True, plan=ONE_PROMPT))
            assert wyoming_audio(events) == pcm16(np.concatenate([c.audio for c in whole]))
            # an unknown voice for a streamed text: an error, and the stream still ends as Wyoming's do
            await client.write_event(SynthesizeStart(voice=SynthesizeVoice(name="nobody")).event())
            await client.write_event(SynthesizeChunk(text="Hi.").event())
            await client.write_event(SynthesizeStop().event())
            error = Error.from_event((await wyoming_until(client, SynthesizeStopped.is_type))[-1])
            assert error.code == "voice_not_found"
            assert SynthesizeStopped.is_type((await wyoming_until(client, SynthesizeStopped.is_type))[-1].type)
    try:
        asyncio.run(talk())
    finally:
        running.stop()
    assert app.state.admission.admitted == 0


def test_503_while_the_model_loads_then_served(engine):
    from kazeia.engine.serve.gate import LoadingGate
    release = threading.Event()

    def load():
        assert release.wait(60)
        return create_app(engine, VoiceBook(engine.model), ServerSettings("demo"))
    running = Running(LoadingGate(load))
    try:
        r = httpx.get(running.url + "/health")
        assert r.status_code == 503 and r.json()["status"] == "loading" and r.headers["retry-after"] == "2"
        with pytest.raises(openai.InternalServerError) as e:
            speech(running.client(), "pcm", frames=2)
        assert e.value.status_code == 503 and e.value.body["code"] == "model_loading"
        release.set()
        deadline = time.time() + 30
        while httpx.get(running.url + "/health").status_code != 200:
            assert time.time() < deadline
            time.sleep(0.05)
        assert len(speech(running.client(), "pcm", frames=2)) == 2 * 1920 * 2
    finally:
        running.stop()
    failures = []

    def broken():
        raise ValueError("model.gguf: not a GGUF file")
    running = Running(LoadingGate(broken, failures.append))
    try:
        deadline = time.time() + 30
        while not failures:
            assert time.time() < deadline
            time.sleep(0.05)
        r = httpx.post(running.url + "/v1/audio/speech", json={})
        assert r.status_code == 503 and "failed to load: model.gguf: not a GGUF file" in r.json()["error"]["message"]
    finally:
        running.stop()


def test_bounded_load_every_response_whole_or_a_documented_429(engine):
    """1, 2, 4 and 8 clients at once against 4 batch slots and 2 queue places: every response is
    complete or a 429 (only beyond capacity), the process's memory stays bounded."""
    from kazeia.engine.proc_stats import current_rss_mb
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("demo", max_batch=4, max_queue=2))
    frames, whole = 40, 40 * 1920 * 2
    with Running(app) as running:
        clients(running.url, 1, 2, "alloy")
        rss_before = current_rss_mb()
        for count in (1, 2, 4, 8, 8):
            results, wall = clients(running.url, count, frames, "alloy", timeout_s=120)
            assert wall < 120
            ok = [r for r in results if r["status"] == 200]
            assert all(r["bytes"] == whole for r in ok), [r["bytes"] for r in ok]   # none cut short
            assert all(r["status"] in (200, 429) for r in results), results
            assert len(ok) == count if count <= 6 else len(ok) >= 6   # (429s only beyond the 6 places)
        assert app.state.admission.admitted == 0
        assert current_rss_mb() - rss_before < 300


def test_bench_serve_reports_ttfa_and_throughput_per_client_count():
    r = subprocess.run([sys.executable, "-m", "kazeia.engine", "bench", "--serve", "--model", "demo", "--clients", "2",
                        "--frames", "4", "--json", "-", "--quiet"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout[r.stdout.index("{"):r.stdout.rindex("}") + 1])
    assert result["stage"] == "serve"
    for key in ("clients", "whole_text_clients"):   # both prompts, side by side
        assert set(result[key]) == {"1", "2"}   # (one client always, to compare)
        for d in result[key].values():
            assert d["lost"] == 0 and 0 < d["ttfa_p50_s"] <= d["ttfa_p95_s"] and d["throughput"] > 0
        assert result[key]["1"]["vs_one_client"] == 1.0
    from kazeia.engine.bench.report import summary
    assert "TTFA p95 ms" in summary(result)


@pytest.mark.slow
def test_fuzzed_from_its_own_schema_no_5xx_and_every_response_conforms(tmp_path):
    """schemathesis drives a `kazeia serve` process from its own OpenAPI schema (every operation,
    bounded examples, a fixed seed; the server caps frames so each valid request is short)."""
    port = free_port()
    proc = start_serve(port, "--max-frames", "3", "--api-key", KEY)
    try:
        r = subprocess.run([str(Path(sys.executable).parent / "st"), "run", f"http://127.0.0.1:{port}/openapi.json",
                            "-H", f"Authorization: Bearer {KEY}", "--checks", "all", "--max-examples", "25",
                            "--seed", "1", "--request-timeout", "60"],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)   # (its example database)
        assert r.returncode == 0, r.stdout[-3000:]
        assert "passed" in r.stdout and "failure" not in r.stdout.split("SUMMARY")[-1].replace("0 failures", "")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
