"""The live sockets (engine/serve/sockets.py): text that arrives while it is spoken, each turn's
audio the whole text's take, bit for bit (one utterance, or a long or marked-up text's chunks); Kazeia's own socket driven by the
`websockets` client, the Deepgram-shaped one by LiveKit Agents' Deepgram plugin, unchanged; Wyoming's
streamed text through the same turns. Real servers on loopback."""
from __future__ import annotations

import asyncio
import json
import random
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")

import websockets

from kazeia.engine import Engine, Request, SamplingParams
from kazeia.engine.serve.app import ServerSettings, create_app
from kazeia.engine.serve.encoders import pcm16
from kazeia.engine.serve.local import LocalServer
from kazeia.engine.serve.voices import VoiceBook
from kazeia.engine.synthesis.requests import ONE_PROMPT
from serve.clients import live_turn, turn_audio, ws_url

KEY = "live-key"
FRAMES = 24
TEXT = "Streaming text, one word at a time."


@pytest.fixture(scope="module")
def engine():
    from kazeia.engine import demo_model_path
    return Engine.load(demo_model_path(), threads=2, max_batch=4)


def serve(engine, **settings):
    settings = {"api_key": KEY, "max_batch": 4, "max_queue": 4, "max_frames": FRAMES, **settings}
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("demo", **settings))
    return LocalServer(app), app


@pytest.fixture(scope="module")
def server(engine):
    running, app = serve(engine)
    yield running
    running.stop()
    assert app.state.admission.admitted == 0


def whole(engine, text=TEXT, speaker="vivian", seed=None) -> bytes:
    """The whole text given at once with streaming text: what every turn must equal."""
    extra = {} if seed is None else {"seed": seed}
    sampling = SamplingParams.from_model(engine.info, max_frames=FRAMES, **extra)
    stream = engine.open_take(Request(text, speaker=speaker, sampling=sampling, streaming_text=True, plan=ONE_PROMPT))
    return pcm16(np.concatenate([c.audio for c in stream]))


def pieces(text: str, rng: random.Random) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, min(12, len(text) - 1))))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def test_own_socket_turns_equal_the_whole_text_for_any_split(server, engine):
    rng = random.Random(7)
    texts = [TEXT, "A second turn on the same socket."]

    async def talk():
        headers = {"Authorization": f"Bearer {KEY}"}
        async with websockets.connect(ws_url(server, "/v1/audio/speech/live", voice="vivian"),
                                      additional_headers=headers) as ws:
            ready = json.loads(await ws.recv())
            assert ready["type"] == "ready" and ready["sample_rate"] == 24000 and ready["format"] == "pcm"
            got = []
            for text in texts:
                for piece in pieces(text, rng):
                    await ws.send(json.dumps({"type": "text", "text": piece}))
                    await asyncio.sleep(rng.choice([0, 0, 0.01, 0.05]))
                await ws.send(json.dumps({"type": "flush"}))
                audio, messages = await turn_audio(ws)
                assert [m["type"] for m in messages] == ["turn.start", "turn.end"], messages
                end = messages[-1]
                assert end["outcome"] == "ok" and end["frames"] == FRAMES and end["ttfa_ms"] > 0
                assert end["audio_ms"] == round(1000 * len(audio) / 2 / 24000)
                got.append(audio)
            await ws.send(json.dumps({"type": "close"}))
            with pytest.raises(websockets.ConnectionClosedOK):
                await asyncio.wait_for(ws.recv(), 30)
            return got

    got = asyncio.run(talk())
    for text, audio in zip(texts, got):
        assert audio == whole(engine, text)


def test_words_that_come_faster_than_the_model_reads_are_gathered(server, engine, monkeypatch):
    """While the model has text enough it has not read, a turn's next deltas gather into one plan
    (the engine's live take: planning each word as it comes would take the cores from the speech):
    every word reaches the turn's take, planned fewer times than there are words, the same audio as
    the whole text."""
    from kazeia.engine.serve.live import LiveJob
    from kazeia.engine.synthesis import live_take
    text = "Words sent all at once are read one token a frame, so most of them wait and go in together."
    writes, planned, plan_open = [], [], live_take.compose_open
    write = LiveJob.write
    monkeypatch.setattr(LiveJob, "write", lambda job, delta: (writes.append(delta), write(job, delta)))
    monkeypatch.setattr(live_take, "compose_open", lambda text, **args: planned.append(text) or plan_open(text, **args))
    audio, messages = asyncio.run(live_turn(server, KEY, [word + " " for word in text.split(" ")], voice="vivian"))
    assert messages[-1]["outcome"] == "ok"
    assert "".join(writes) == text + " " and len(planned) <= len(text.split(" ")) // 2, planned
    assert audio == whole(engine, text)


def test_cancel_stops_within_a_frame_and_the_socket_goes_on(engine):
    running, app = serve(engine, max_frames=400)   # (long enough to be cut short)

    async def talk():
        async with websockets.connect(ws_url(running, "/v1/audio/speech/live", voice="ryan"),
                                      additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
            await ws.recv()   # ready
            await ws.send(json.dumps({"type": "text", "text": "This turn is interrupted by its listener."}))
            await ws.send(json.dumps({"type": "flush"}))
            assert json.loads(await ws.recv())["type"] == "turn.start"
            first = await asyncio.wait_for(ws.recv(), 60)
            assert isinstance(first, bytes)
            steps = app.state.live.engine.shared_batcher.steps
            await ws.send(json.dumps({"type": "cancel"}))
            messages = []
            while not messages or messages[-1]["type"] != "cancelled":
                message = await asyncio.wait_for(ws.recv(), 30)
                if isinstance(message, str):
                    messages.append(json.loads(message))
            frames_after = app.state.live.engine.shared_batcher.steps - steps
            assert [m["type"] for m in messages] == ["turn.end", "cancelled"]
            assert messages[0]["outcome"] == "cancelled" and messages[1]["turns"] == 1
            assert messages[0]["frames"] < 400
            # the socket goes on: the next text is a new turn, cancelled before its flush
            await ws.send(json.dumps({"type": "text", "text": "Hi."}))
            await ws.send(json.dumps({"type": "cancel"}))
            kinds = []
            while not kinds or kinds[-1] != "cancelled":
                message = await asyncio.wait_for(ws.recv(), 30)
                if isinstance(message, str):
                    kinds.append(json.loads(message)["type"])
            assert kinds == ["turn.start", "turn.end", "cancelled"]
            return frames_after

    try:
        frames_after = asyncio.run(talk())
    finally:
        running.stop()
    assert frames_after <= 3   # (the step running when the cancel came, and at most one more)
    assert app.state.admission.admitted == 0


def test_refusals_name_what_is_wrong(server, engine):
    async def denied(path, headers=None, **query) -> tuple[int, dict]:
        with pytest.raises(websockets.InvalidStatus) as e:
            async with websockets.connect(ws_url(server, path, **query), additional_headers=headers or {}):
                pass
        response = e.value.response
        return response.status_code, json.loads(response.body)["error"]

    async def talk():
        auth = {"Authorization": f"Bearer {KEY}"}
        status, error = await denied("/v1/audio/speech/live", voice="vivian")
        assert status == 401 and error["code"] == "invalid_api_key"
        status, error = await denied("/v1/audio/speech/live", auth, voice="nobody")
        assert status == 404 and error["code"] == "voice_not_found" and "vivian" in error["message"]
        status, error = await denied("/v1/audio/speech/live", auth, voice="vivian", colour="red")
        assert status == 400 and error["param"] == "colour"
        status, error = await denied("/v1/audio/speech/live", auth, voice="vivian", hold_ms="-5")
        assert status == 400 and error["param"] == "hold_ms"
        status, error = await denied("/v1/speak", {"Authorization": f"Token {KEY}"}, model="vivian",
                                     sample_rate="44100")
        assert status == 400 and error["param"] == "sample_rate"
        # bad messages: named, and the socket goes on
        async with websockets.connect(ws_url(server, "/v1/audio/speech/live", voice="vivian"),
                                      additional_headers=auth) as ws:
            await ws.recv()
            for bad, code in (("not json", "invalid_json"), (json.dumps({"type": "shout"}), "unknown_type"),
                              (json.dumps({"type": "text", "text": 5}), "invalid_value"),
                              (json.dumps({"type": "flush"}), "nothing_to_flush"), (b"\x00\x01", "binary_not_accepted")):
                await ws.send(bad)
                reply = json.loads(await asyncio.wait_for(ws.recv(), 30))
                assert reply["type"] == "error" and reply["code"] == code, (bad, reply)
            await ws.send(json.dumps({"type": "text", "text": "   "}))
            await ws.send(json.dumps({"type": "flush"}))
            messages = [json.loads(await asyncio.wait_for(ws.recv(), 30)) for _ in range(3)]
            assert {"error", "turn.start", "turn.end"} <= {m["type"] for m in messages}
            assert any(m.get("code") == "invalid_text" and "empty" in m["message"] for m in messages)

    asyncio.run(talk())


def test_hold_ms_is_checked_once_with_one_bound():
    """The live socket's hold_ms: one check (sockets.check_hold_ms), one bound, the answer a bound of
    the query's other fields gives (NaN and infinity refused as over it)."""
    from kazeia.engine.serve.errors import ApiError
    from kazeia.engine.serve.sockets import LiveQuery
    from kazeia.engine.synthesis.requests import MAX_HOLD_MS
    from kazeia.engine.serve.speech import parse
    for fine in (0, 250.5, MAX_HOLD_MS):
        assert parse({"voice": "vivian", "hold_ms": str(fine)}, LiveQuery).hold_ms == fine
    for bad, code in (("-5", "greater_than_equal"), (str(MAX_HOLD_MS + 0.5), "less_than_equal"),
                      ("nan", "less_than_equal"), ("inf", "less_than_equal"), ("soon", "float_parsing")):
        with pytest.raises(ApiError) as e:
            parse({"voice": "vivian", "hold_ms": bad}, LiveQuery)
        assert (e.value.status, e.value.param, e.value.code) == (400, "hold_ms", code), bad


def test_a_stalled_turn_is_spoken_then_the_socket_closes(engine):
    running, app = serve(engine, idle_timeout_s=1.0)

    async def talk():
        async with websockets.connect(ws_url(running, "/v1/audio/speech/live", voice="vivian", seed=3),
                                      additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
            await ws.recv()
            await asyncio.sleep(2.5)   # between turns a socket may rest (an agent's pool keeps it)
            await ws.send(json.dumps({"type": "text", "text": TEXT}))
            audio, messages = bytearray(), []
            t0 = time.perf_counter()
            with pytest.raises(websockets.ConnectionClosedOK):
                while True:
                    message = await asyncio.wait_for(ws.recv(), 60)
                    if isinstance(message, bytes):
                        audio += message
                    else:
                        messages.append(json.loads(message))
            return bytes(audio), messages, time.perf_counter() - t0

    try:
        audio, messages, seconds = asyncio.run(talk())
    finally:
        running.stop()
    kinds = [m["type"] for m in messages]
    assert kinds[0] == "turn.start" and "turn.end" in kinds
    assert any(m.get("code") == "idle_timeout" for m in messages)
    assert audio == whole(engine, TEXT, seed=3)   # (what was sent is spoken, whole)
    assert 1.0 <= seconds < 60 and app.state.admission.admitted == 0


def test_full_server_refuses_the_handshake_with_retry_after(engine):
    running, app = serve(engine, max_batch=1, max_queue=0)

    async def talk():
        auth = {"Authorization": f"Bearer {KEY}"}
        async with websockets.connect(ws_url(running, "/v1/audio/speech/live", voice="vivian"),
                                      additional_headers=auth) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "text", "text": "Holding the only slot "}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] == "turn.start"
            with pytest.raises(websockets.InvalidStatus) as e:
                async with websockets.connect(ws_url(running, "/v1/audio/speech/live", voice="vivian"),
                                              additional_headers=auth):
                    pass
            assert e.value.response.status_code == 429 and int(e.value.response.headers["Retry-After"]) >= 1
        # the first socket went away mid-turn: its slot is free again
        for _ in range(100):
            if app.state.admission.admitted == 0:
                break
            await asyncio.sleep(0.05)

    try:
        asyncio.run(talk())
    finally:
        running.stop()
    assert app.state.admission.admitted == 0


def test_livekit_deepgram_plugin_unchanged_speaks_each_reply_as_one_utterance(server, engine):
    """LiveKit Agents' Deepgram TTS, pointed at Kazeia: its words go in as they come, a flush per
    reply; each reply's audio is the whole reply's."""
    aiohttp = pytest.importorskip("aiohttp")
    from livekit.plugins import deepgram
    replies = ["Hello from an agent.", "And a second reply."]

    async def talk():
        async with aiohttp.ClientSession() as session:
            tts = deepgram.TTS(model="vivian", api_key=KEY, base_url=server.url + "/v1/speak",
                               http_session=session)
            got, reused = [], []
            for reply in replies:   # (as an agent does: a stream per reply, the socket kept in its pool)
                stream = tts.stream()
                for word in reply.split(" "):
                    stream.push_text(word + " ")
                    await asyncio.sleep(0.01)
                stream.end_input()
                got.append(b"".join([bytes(event.frame.data) async for event in stream]))
                reused.append(stream._connection_reused)
                await stream.aclose()
            await tts.aclose()
            return got, reused

    got, reused = asyncio.run(asyncio.wait_for(talk(), 120))
    assert reused == [False, True]   # (both replies on one socket: two turns)
    for reply, audio in zip(replies, got):   # (its word tokenizer sends each word with a space after it)
        assert len(audio) == FRAMES * 1920 * 2 and audio == whole(engine, reply + " ")


def test_pipecat_deepgram_service_unchanged_speaks_each_reply_as_one_utterance(server, engine, tmp_path,
                                                                               monkeypatch):
    """Pipecat's DeepgramTTSService (its own venv: tests/serve/setup_pipecat_venv.sh) with its
    base_url pointed at Kazeia, fed a language model's deltas: Pipecat gathers them into sentences,
    sends each as a Speak and flushes at the end of the reply; each reply is one turn, and its audio
    the take of the whole text the socket was given."""
    import os
    import subprocess
    from pathlib import Path

    from kazeia.engine.serve.live import LiveJob
    python = os.environ.get("KAZEIA_PIPECAT_PYTHON")
    if not python:
        if os.environ.get("KAZEIA_REQUIRE_REFERENCE"):
            pytest.fail("KAZEIA_PIPECAT_PYTHON is not set (scripts/test.sh makes Pipecat's venv)")
        pytest.skip("Pipecat's venv: bash tests/serve/setup_pipecat_venv.sh DIR, then KAZEIA_PIPECAT_PYTHON=DIR/bin/python")
    replies = [["Sure", ", here", " is the", " short version", ". The train", " leaves at", " nine."],
               ["A second", " reply,", " on the", " same socket."]]
    given = {}   # the text each turn's job was given, by job
    write = LiveJob.write

    def record(job, delta):
        given[id(job)] = given.get(id(job), "") + delta
        return write(job, delta)
    monkeypatch.setattr(LiveJob, "write", record)
    client = Path(__file__).with_name("pipecat_client.py")
    run = subprocess.run([python, str(client), server.url.replace("http", "ws"), KEY, str(tmp_path), json.dumps(replies)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    texts = list(given.values())
    assert [t.split() for t in texts] == ["".join(reply).split() for reply in replies]   # (a turn per reply)
    for i, text in enumerate(texts):   # (the turn's text as Pipecat sent it: sentences with a space after each)
        audio = (tmp_path / f"reply{i}.pcm").read_bytes()
        assert len(audio) == FRAMES * 1920 * 2 and audio == whole(engine, text.lstrip())


def test_bench_agent_reports_both_ways_side_by_side(tmp_path):
    from support.commands import kazeia
    out = tmp_path / "agent.json"
    r = kazeia("bench", "--agent", "--model", "demo", "--frames", "8", "--rates", "100,0", "--clients", "1",
               "-q", "--json", str(out), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["stage"] == "agent" and result["answer_tokens"] > 0
    cases = {(c["rate_tokens_per_s"], c["mode"]): c for c in result["cases"]}
    assert set(cases) == {(100, "live"), (100, "sentences"), (None, "live"), (None, "sentences")}
    for case in cases.values():
        assert 0 < case["ttfa_p50_s"] <= case["ttfa_p95_s"] < 60 and case["audio_s_per_wall_s"] > 0
        assert case["stalls_per_socket"] >= 0
    assert result["waiting"]["ms_per_frame_alone"] > 0 and result["waiting"]["ratio"] > 0
    assert "live" in r.stdout and "sentences" in r.stdout


def take_of(engine, text, speaker="vivian") -> bytes:
    """The whole text as POST /v1/audio/speech speaks it (a long or marked-up text: its chunks)."""
    sampling = SamplingParams.from_model(engine.info, max_frames=FRAMES)
    return pcm16(engine.take(Request(text, speaker=speaker, sampling=sampling, streaming_text=True)).audio)


def test_eight_sockets_at_once_each_speak_their_whole_texts_take(engine):
    """Eight sockets start together, each writing its answer in random pieces: short ones, and ones
    the long-text front end cuts into chunks (a pause tag, a paragraph); each turn's audio is its
    whole text's take, bit for bit, and the whole run is bounded in time."""
    running, app = serve(engine, max_queue=4)
    texts = [f"Answer {i}: short and plain." if i % 2 else
             f"Answer {i} has two parts. [pause:200ms] The second, after a pause.\n\nAnd a paragraph."
             for i in range(8)]

    async def one(i: int, text: str) -> bytes:
        rng = random.Random(i)
        async with websockets.connect(ws_url(running, "/v1/audio/speech/live", voice="vivian"),
                                      additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
            await ws.recv()
            for piece in pieces(text, rng):
                await ws.send(json.dumps({"type": "text", "text": piece}))
                await asyncio.sleep(rng.choice([0, 0.01, 0.03]))
            await ws.send(json.dumps({"type": "flush"}))
            audio, messages = await turn_audio(ws)
            assert messages[-1]["type"] == "turn.end" and messages[-1]["outcome"] == "ok", messages
            return audio

    async def all_at_once():
        return await asyncio.wait_for(asyncio.gather(*(one(i, t) for i, t in enumerate(texts))), 240)

    try:
        got = asyncio.run(all_at_once())
    finally:
        running.stop()
    assert app.state.admission.admitted == 0
    for text, audio in zip(texts, got):
        assert audio == take_of(engine, text), text
