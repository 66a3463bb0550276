"""The server's boundary as a hostile client meets it (engine/serve/boundary.py, wyoming_events.py,
live.py, sockets.py): a foreign web page (Origin) or a rebound name (Host) refused with 403; JSON
that nests without bound, huge integers, NaN and out-of-range sampling answered 400 naming the
field; on the live socket a deep message, an oversized one, a turn's text over its cap, a client
that leaves mid-turn or never reads; on Wyoming a client that sends a byte a second, one that never
reads, a declared payload over the cap; listeners beyond loopback without a guard refused. Each
ends with the server still serving and its slots free. Real servers on loopback, short limits."""
from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import time

import pytest

pytest.importorskip("fastapi")
import httpx2 as httpx  # noqa: E402
import websockets  # noqa: E402

from kazeia.engine import Engine  # noqa: E402
from kazeia.engine.serve.app import ServerSettings, create_app  # noqa: E402
from kazeia.engine.serve.boundary import Boundary  # noqa: E402
from kazeia.engine.serve.local import LocalServer, free_port  # noqa: E402
from kazeia.engine.serve.voices import VoiceBook  # noqa: E402

KEY = "boundary-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
LIMIT_S = 1.5   # every wait the server bounds, made short
LIVE = "/v1/audio/speech/live"


@pytest.fixture(scope="module")
def engine():
    from kazeia.engine import demo_model_path
    return Engine.load(demo_model_path(), threads=2, max_batch=4)


@pytest.fixture(scope="module")
def served(engine):
    """(server, app): short limits, a Wyoming port beside it."""
    wyoming_port = free_port()
    settings = ServerSettings("demo", api_key=KEY, max_batch=4, max_queue=4, max_frames=24,
                              send_timeout_s=LIMIT_S, read_timeout_s=LIMIT_S, idle_timeout_s=LIMIT_S,
                              max_turn_chars=300, allowed_hosts=["tts.lan"], cors_origins=["https://app.example"],
                              wyoming=("127.0.0.1", wyoming_port))
    app = create_app(engine, VoiceBook(engine.model), settings)
    running = LocalServer(app)
    running.wyoming_port = wyoming_port
    yield running, app
    running.stop()
    assert app.state.admission.admitted == 0


def free_within(app, seconds: float) -> float:
    """Seconds until every admission slot is free again (fails past `seconds`)."""
    start = time.perf_counter()
    while app.state.admission.admitted:
        assert time.perf_counter() - start < seconds, f"{app.state.admission.admitted} slot(s) still held"
        time.sleep(0.02)
    return time.perf_counter() - start


def still_serves(server) -> None:
    r = httpx.post(server.url + "/v1/audio/speech", headers=AUTH, timeout=60,
                   json={"model": "tts-1", "voice": "vivian", "input": "Still here.", "response_format": "pcm",
                         "max_frames": 2})
    assert r.status_code == 200 and len(r.content) == 2 * 1920 * 2


def ws_url(server, path=LIVE, **query) -> str:
    from urllib.parse import urlencode
    return server.url.replace("http", "ws") + path + "?" + urlencode({"voice": "vivian", **query})


# ---- Origin and Host ------------------------------------------------------------------------------
def test_the_boundary_takes_loopback_and_listed_origins_and_hosts_only():
    b = Boundary("127.0.0.1", ["tts.lan"], ["https://app.example"])
    for host in ("localhost:8000", "127.0.0.1:9", "[::1]:80", "tts.lan", "TTS.lan:8000", None):
        assert b.host_refusal(host) is None, host
    for host in ("evil.example", "evil.example:8000", "10.0.0.7:8000", "localhost.evil.example"):
        assert "DNS rebinding" in b.host_refusal(host), host
    for origin in ("http://localhost:5173", "https://127.0.0.1", "http://[::1]:3000", "https://app.example", None):
        assert b.origin_refusal(origin) is None, origin
    for origin in ("http://evil.example", "null", "http://localhost.evil.example", "http://127.0.0.1.nip.io",
                   "file://", "https://app.example.evil"):
        assert "--cors-origin" in b.origin_refusal(origin), origin
    wide = Boundary("0.0.0.0")   # (bound to every address: any IP literal, never an unknown name)
    assert wide.host_refusal("192.168.1.20:8000") is None and wide.host_refusal("evil.example") is not None


def test_a_foreign_page_or_host_is_refused_over_http(served):
    server, app = served
    speech = {"model": "tts-1", "voice": "vivian", "input": "Hi.", "response_format": "pcm", "max_frames": 2}
    r = httpx.post(server.url + "/v1/audio/speech", headers={**AUTH, "Origin": "http://evil.example"}, json=speech)
    assert r.status_code == 403 and r.json()["error"]["param"] == "origin" and "evil.example" in r.text
    r = httpx.get(server.url + "/v1/models", headers={**AUTH, "Host": "evil.example"})
    assert r.status_code == 403 and r.json()["error"]["param"] == "host" and "DNS rebinding" in r.text
    for headers in ({"Origin": "http://localhost:5173"}, {"Origin": "https://app.example"}, {},
                    {"Host": "tts.lan:8000"}):
        r = httpx.post(server.url + "/v1/audio/speech", headers={**AUTH, **headers}, json=speech, timeout=60)
        assert r.status_code == 200, (headers, r.text)
    assert app.state.admission.admitted == 0


def test_a_foreign_page_cannot_open_a_live_socket(served):
    server, _ = served

    async def talk():
        with pytest.raises(websockets.InvalidStatus) as e:
            async with websockets.connect(ws_url(server), additional_headers=AUTH, origin="http://evil.example"):
                pass
        assert e.value.response.status_code == 403
        assert json.loads(e.value.response.body)["error"]["param"] == "origin"
        for origin in ("http://localhost:8080", None):   # a page on this machine; a program (no Origin)
            async with websockets.connect(ws_url(server), additional_headers=AUTH, origin=origin) as ws:
                assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "ready"
    asyncio.run(talk())


# ---- hostile JSON over HTTP ---------------------------------------------------------------------
@pytest.mark.parametrize("body, param, words", [
    ('{"input": ' + "[" * 100_000 + "]" * 100_000 + "}", None, "nested deeper"),
    ('{"model": "tts-1", "voice": "vivian", "input": "Hi.", "seed": ' + "9" * 5000 + "}", None, "digits"),
    ('{"model": "tts-1", "voice": "vivian", "input": "Hi.", "temperature": NaN}', None, "not a number"),
    ('{"model": "tts-1", "voice": "vivian", "input": "Hi.", "temperature": 1e999}', None, "1e999 is not a finite number"),
    ('{"model": "tts-1", "voice": "vivian", "input": "Hi.", "top_k": 99999999999}', "top_k", "top_k"),
    ('{"model": "tts-1", "voice": "vivian", "input": "Hi.", "max_frames": 10000000}', "max_frames", "max_frames"),
    ('{"model": "tts-1", "voice": "vivian", "input": "Hi.", "speed": -1e999}', None, "-1e999 is not a finite number"),
    ('{"model": "tts-1", "voice": "vivian", "input": "Hi.", "top_p": "0.5x"}', "top_p", "top_p"),
])
def test_hostile_json_is_a_400_naming_what_is_wrong(served, body, param, words):
    server, app = served
    start = time.perf_counter()
    r = httpx.post(server.url + "/v1/audio/speech", content=body, timeout=30,
                   headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"] and "Traceback" not in r.text
    assert time.perf_counter() - start < 5 and app.state.admission.admitted == 0


def test_a_body_sent_a_byte_at_a_time_is_dropped_after_the_read_limit(served):
    server, app = served
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])), timeout=10) as sock:
        sock.sendall(f"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
                     "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode())
        sock.settimeout(0.3)
        answer = b""
        while b"\r\n\r\n" not in answer and time.perf_counter() - start < LIMIT_S + 5:
            try:
                sock.sendall(b" ")
                answer += sock.recv(4096)
            except TimeoutError:
                pass
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert time.perf_counter() - start < LIMIT_S + 2 and app.state.admission.admitted == 0


def test_an_http_client_that_never_reads_its_stream_is_dropped(engine, report):
    """The app (ASGI, no socket: a real one takes ~20 s of audio to fill the kernel's buffers, measured
    23 s) with a client that takes the first piece of its stream, then reads nothing: the request
    ends at the send limit, its generator closed, its slot freed."""
    settings = ServerSettings("demo", max_frames=4000, send_timeout_s=LIMIT_S)
    app = create_app(engine, VoiceBook(engine.model), settings)
    body = json.dumps({"model": "tts-1", "voice": "vivian", "input": "Nobody reads this. " * 20,
                       "response_format": "pcm"}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/audio/speech", "raw_path": b"/v1/audio/speech",
             "query_string": b"", "root_path": "", "client": ("127.0.0.1", 5555), "server": ("127.0.0.1", 80),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    sent = []

    async def talk():
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if messages:
                return messages.pop()
            await asyncio.Event().wait()   # (the client never leaves)

        async def send(message):
            sent.append(message["type"])
            if len(sent) > 2:   # (the start and a first piece, then nothing is read)
                await asyncio.Event().wait()
        start = time.perf_counter()
        await asyncio.wait_for(app(scope, receive, send), 60)
        assert app.state.admission.admitted == 0   # (now: not when the loop ends and closes what is left)
        return time.perf_counter() - start
    seconds = asyncio.run(talk())
    assert sent[:2] == ["http.response.start", "http.response.body"]
    assert 'kazeia_requests_total{outcome="disconnected"} 1.0' in app.state.metrics.exposition().decode()
    report(f"an HTTP client that stops reading its stream: dropped, its slot free, {seconds:.1f} s after "
           f"its request (send limit {LIMIT_S} s)")


# ---- the live socket ------------------------------------------------------------------------------
async def until(ws, kind: str, seconds: float = 30) -> list[dict]:
    messages = []
    while not messages or messages[-1]["type"] != kind:
        message = await asyncio.wait_for(ws.recv(), seconds)
        if isinstance(message, str):
            messages.append(json.loads(message))
    return messages


def test_a_deep_message_mid_turn_is_an_error_and_leaving_frees_the_slot(served):
    """"[" * 100000 once raised RecursionError past the read loop: the turn was never abandoned and
    held its admission slot and batcher seat for ever."""
    server, app = served

    async def talk():
        async with websockets.connect(ws_url(server), additional_headers=AUTH) as ws:
            await until(ws, "ready")
            await ws.send(json.dumps({"type": "text", "text": "A turn left open"}))
            await until(ws, "turn.start")
            await ws.send("[" * 60_000)   # (under the size cap: the depth is what is refused)
            error = (await until(ws, "error"))[-1]
            assert error["code"] == "invalid_json" and "nested deeper" in error["message"]
            await ws.send("[" * 100_000)
            assert "over the limit" in (await until(ws, "error"))[-1]["message"]
            await ws.send('{"type": "text", "text": ' + "1" * 5000 + "}")
            assert "digits" in (await until(ws, "error"))[-1]["message"]
            assert app.state.admission.admitted == 1   # (the turn goes on)
        # the client left mid-turn, its text never flushed
    asyncio.run(talk())
    seconds = free_within(app, 10)
    assert seconds < 5
    still_serves(server)


def test_oversized_messages_and_a_turn_over_its_cap_are_refused(served):
    server, app = served

    async def talk():
        async with websockets.connect(ws_url(server), additional_headers=AUTH, max_size=None) as ws:
            await until(ws, "ready")
            await ws.send(json.dumps({"type": "text", "text": "x" * 100, "pad": "y" * 100_000}))
            error = (await until(ws, "error"))[-1]
            assert error["code"] == "invalid_json" and "over the limit" in error["message"]
            for _ in range(4):   # 4 x 90 characters: over the turn's cap of 300
                await ws.send(json.dumps({"type": "text", "text": "Words of a long turn. " * 4}))
            error = (await until(ws, "error"))[-1]
            assert error["code"] == "text_too_long" and "300" in error["message"]
            await ws.send(json.dumps({"type": "flush"}))
            await until(ws, "turn.end")
            with pytest.raises(websockets.ConnectionClosed) as closed:   # over the transport's own cap
                await ws.send(json.dumps({"type": "text", "text": "z" * (2 << 20)}))
                await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    asyncio.run(talk())
    free_within(app, 10)
    still_serves(server)


def test_a_turn_whose_text_never_ends_times_out(engine):
    """The pump's wait for audio is bounded by the request limit even with no text coming."""
    settings = ServerSettings("demo", api_key=KEY, max_frames=24, request_timeout_s=LIMIT_S, idle_timeout_s=600)
    app = create_app(engine, VoiceBook(engine.model), settings)

    async def talk(server):
        async with websockets.connect(ws_url(server), additional_headers=AUTH) as ws:
            await until(ws, "ready")
            await ws.send(json.dumps({"type": "text", "text": "Words with no end"}))
            start = time.perf_counter()
            messages = await until(ws, "turn.end", 30)
            assert any(m["type"] == "error" and m["code"] == "timeout" for m in messages)
            assert messages[-1]["outcome"] == "timeout" and time.perf_counter() - start < LIMIT_S + 5
            assert app.state.admission.admitted == 0
    with LocalServer(app) as server:
        asyncio.run(talk(server))
        still_serves(server)


def raw_websocket(server, path_query: str, rcvbuf: int | None = None) -> socket.socket:
    """A WebSocket opened by hand (a client that then misbehaves below the protocol library)."""
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path_query} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {KEY}\r\n\r\n")
                 .encode())
    sock.settimeout(10)
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def frame(text: str) -> bytes:
    data, mask = text.encode(), os.urandom(4)
    assert len(data) < 126
    return bytes([0x81, 0x80 | len(data)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


@pytest.mark.slow
def test_a_client_that_never_reads_is_dropped_and_its_slot_freed(engine, report):
    settings = ServerSettings("demo", api_key=KEY, max_frames=4000, send_timeout_s=LIMIT_S, idle_timeout_s=600)
    app = create_app(engine, VoiceBook(engine.model), settings)
    with LocalServer(app) as server:
        sock = raw_websocket(server, "/v1/speak?model=vivian&sample_rate=48000", rcvbuf=4096)
        try:
            sock.sendall(frame(json.dumps({"type": "Speak", "text": "A reply nobody reads. " * 4})))
            sock.sendall(frame(json.dumps({"type": "Flush"})))
            deadline = time.perf_counter() + 90
            while not app.state.admission.admitted:
                assert time.perf_counter() < deadline
                time.sleep(0.02)
            seconds = free_within(app, 90)   # (until the buffers fill, then the send limit)
        finally:
            sock.close()
        metrics = httpx.get(server.url + "/metrics", headers=AUTH).text
        assert 'kazeia_requests_total{outcome="disconnected"} 1.0' in metrics   # (dropped, not finished)
        still_serves(server)
    report(f"a live socket that never reads: its slot free {seconds:.1f} s after its turn began "
           f"(send limit {LIMIT_S} s)")


def test_a_socket_trickling_a_byte_at_a_time_mid_turn_is_ended_and_freed(served):
    server, app = served
    sock = raw_websocket(server, "/v1/audio/speech/live?voice=vivian")
    try:
        sock.sendall(frame(json.dumps({"type": "text", "text": "A turn whose writer stalls"})))
        deadline = time.perf_counter() + 10
        while not app.state.admission.admitted:
            assert time.perf_counter() < deadline, "the turn never started"
            time.sleep(0.02)
        start, pieces = time.perf_counter(), frame(json.dumps({"type": "text", "text": " and trickles"}))
        for byte in pieces:   # (a frame that never completes in time: no message arrives)
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.3)
            if not app.state.admission.admitted:
                break
        seconds = free_within(app, 15) + time.perf_counter() - start
    finally:
        sock.close()
    assert seconds < LIMIT_S + 8
    still_serves(server)


def test_a_send_the_client_never_reads_ends_the_request():
    """BoundaryMiddleware: the app's send raises at the limit (its clean-up frees what it held), and a
    WebSocket's next receive says the client is gone."""
    from kazeia.engine.serve.boundary import BoundaryMiddleware, SendTimeout
    seen = []

    async def app(scope, receive, send):
        try:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        except SendTimeout as e:
            seen.append(str(e))
            if scope["type"] == "websocket":
                seen.append((await receive())["type"])
            raise

    async def stalled_send(message):
        await asyncio.Event().wait()

    async def receive():
        await asyncio.Event().wait()

    async def run(kind):
        guard = BoundaryMiddleware(app, Boundary(), send_timeout_s=0.2)
        await asyncio.wait_for(guard({"type": kind, "headers": []}, receive, stalled_send), 5)
    asyncio.run(run("http"))
    asyncio.run(run("websocket"))
    assert seen[0].startswith("the client read nothing") and seen[-1] == "websocket.disconnect"


# ---- Wyoming ------------------------------------------------------------------------------------
def wyoming_reply(sock: socket.socket, seconds: float = 10) -> dict | None:
    """The next event's header and data (None: the server closed the connection)."""
    sock.settimeout(seconds)
    stream = sock.makefile("rb")
    line = stream.readline()
    if not line:
        return None
    header = json.loads(line)
    if header.get("data_length"):
        header.setdefault("data", {}).update(json.loads(stream.read(header["data_length"])))
    return header


def wyoming_socket(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.wyoming_port), timeout=10)


@pytest.mark.parametrize("sent, says", [
    (b'{"type": "describe", "payload_length": 1099511627776}\n', "payload_length"),
    (b'{"type": "describe", "data_length": 1099511627776}\n', "data_length"),
    (b'{"type": "describe", "data": ' + b"[" * 50_000 + b"\n", "nested deeper"),
    (b'{"type": "describe", "data_length": ' + b"9" * 5000 + b"}\n", "digits"),
    (b"x" * 70_000 + b"\n", "over"),
])
def test_a_wyoming_event_over_a_limit_is_an_error_then_the_connection_closes(served, sent, says):
    server, app = served
    with wyoming_socket(server) as sock:
        sock.sendall(sent)
        reply = wyoming_reply(sock)
        assert reply["type"] == "error" and says in reply["data"]["text"], reply
        assert wyoming_reply(sock) is None
    with wyoming_socket(server) as sock:   # and the next client is served
        sock.sendall(b'{"type": "describe"}\n')
        assert wyoming_reply(sock)["type"] == "info"
    assert app.state.admission.admitted == 0


def test_wyoming_text_over_the_cap_and_wrong_types_are_errors(served):
    server, app = served
    with wyoming_socket(server) as sock:
        for data, code in (({"text": "x" * 5000}, "text_too_long"), ({"text": 5}, "invalid_event"),
                           ({"voice": {"name": "vivian"}}, "invalid_event")):
            body = json.dumps(data).encode()
            sock.sendall(json.dumps({"type": "synthesize", "data_length": len(body)}).encode() + b"\n" + body)
            reply = wyoming_reply(sock)
            assert reply["type"] == "error" and reply["data"]["code"] == code, reply
    assert app.state.admission.admitted == 0


def test_a_wyoming_client_sending_a_byte_a_second_is_dropped(served):
    server, app = served
    start = time.perf_counter()
    with wyoming_socket(server) as sock:
        sock.settimeout(LIMIT_S + 5)
        dropped = False
        for byte in b'{"type": "describe"}\n':
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                dropped = True
                break
            time.sleep(0.3)
            if time.perf_counter() - start > LIMIT_S + 1:
                break
        reply = wyoming_reply(sock, LIMIT_S + 5) if not dropped else None
        assert dropped or (reply["type"] == "error" and "no whole event" in reply["data"]["text"])
    assert time.perf_counter() - start < LIMIT_S + 5 and app.state.admission.admitted == 0


def test_a_wyoming_stream_left_open_is_abandoned_after_the_read_limit(served):
    server, app = served
    with wyoming_socket(server) as sock:
        for event in ({"type": "synthesize-start", "data": {"voice": {"name": "vivian"}}},
                      {"type": "synthesize-chunk", "data": {"text": "A stream whose end never comes"}}):
            sock.sendall(json.dumps(event).encode() + b"\n")
        deadline = time.perf_counter() + 10
        while not app.state.admission.admitted:
            assert time.perf_counter() < deadline, "the streamed turn never started"
            time.sleep(0.02)
        seconds = free_within(app, LIMIT_S + 10)
        assert seconds < LIMIT_S + 5
    with wyoming_socket(server) as sock:
        sock.sendall(b'{"type": "describe"}\n')
        assert wyoming_reply(sock)["type"] == "info"


def test_a_wyoming_client_that_never_reads_is_dropped_and_its_slot_freed(engine, report):
    """The handler with a client whose socket never drains (a real one takes ~25 s of audio to fill
    the kernel's buffers first): its request ends at the send limit and frees its slot."""
    from kazeia.engine.serve.wyoming_tts import WyomingHandler, WyomingService

    class StalledWriter:
        def __init__(self):
            self.transport = self
            self.aborted = False

        def get_extra_info(self, name):
            return ("127.0.0.1", 5555)

        def write(self, data):
            pass

        def writelines(self, data):
            pass

        async def drain(self):
            await asyncio.Event().wait()   # (the client reads nothing)

        def abort(self):
            self.aborted = True

    settings = ServerSettings("demo", max_frames=400, send_timeout_s=LIMIT_S)
    app = create_app(engine, VoiceBook(engine.model), settings)

    async def talk():
        reader, writer = asyncio.StreamReader(), StalledWriter()
        body = json.dumps({"text": "A long answer that nobody reads."}).encode()
        reader.feed_data(json.dumps({"type": "synthesize", "data_length": len(body)}).encode() + b"\n" + body)
        handler = WyomingHandler(WyomingService(app.state.live, VoiceBook(engine.model)), reader, writer)
        start = time.perf_counter()
        await asyncio.wait_for(handler.run(), 30)
        assert writer.aborted
        return time.perf_counter() - start
    seconds = asyncio.run(talk())
    assert app.state.admission.admitted == 0 and seconds < LIMIT_S + 3
    assert 'kazeia_requests_total{outcome="disconnected"} 1.0' in app.state.metrics.exposition().decode()
    report(f"a Wyoming client that never reads: dropped, its slot free, {seconds:.1f} s after its request "
           f"(send limit {LIMIT_S} s)")


def test_wyoming_peers_beyond_loopback_need_a_listed_network(engine):
    from kazeia.engine.serve.live import LiveService
    from kazeia.engine.serve.wyoming_tts import WyomingService
    settings = ServerSettings("demo", wyoming_allow=["192.168.1.0/24", "10.0.0.5"])
    live = LiveService(engine, None, settings, lambda *a: None, lambda: None)
    service = WyomingService(live, VoiceBook(engine.model))
    for peer in ("127.0.0.1", "::1", "192.168.1.77", "10.0.0.5", "::ffff:192.168.1.3"):
        assert service.admits(peer), peer
    for peer in ("192.168.2.1", "10.0.0.6", "8.8.8.8", "fe80::1", "", "not an address"):
        assert not service.admits(peer), peer


# ---- listeners --------------------------------------------------------------------------------------
def test_every_listener_beyond_loopback_needs_its_guard():
    from kazeia.engine.serve.run import check_listeners, parse_networks
    check_listeners("127.0.0.1", None, ("127.0.0.1", 10200), ())
    check_listeners("0.0.0.0", "key", ("0.0.0.0", 10200), ("192.168.1.0/24",))
    with pytest.raises(ValueError, match="give an API key"):
        check_listeners("0.0.0.0", None, None, ())
    with pytest.raises(ValueError, match="--wyoming-allow"):
        check_listeners("127.0.0.1", None, ("0.0.0.0", 10200), ())
    with pytest.raises(ValueError, match="--wyoming-allow"):   # (an HTTP key does not guard Wyoming)
        check_listeners("0.0.0.0", "key", ("192.168.1.5", 10200), ())
    assert parse_networks(["192.168.1.0/24,10.0.0.5", "::1"]) == ("192.168.1.0/24", "10.0.0.5/32", "::1/128")
    with pytest.raises(ValueError, match="give a network"):
        parse_networks(["everyone"])


def test_the_command_line_names_the_guards():
    import argparse

    from kazeia.engine.cli import serve as cli
    from kazeia.engine.serve.run import ServeOptions
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())

    def options(*args: str) -> ServeOptions:
        return ServeOptions.from_args(parser.parse_args(["serve", "--model", "demo", *args]))
    with pytest.raises(ValueError, match="--wyoming-allow CIDR"):
        options("--wyoming", "tcp://0.0.0.0:10200")
    o = options("--wyoming", "tcp://0.0.0.0:10200", "--wyoming-allow", "192.168.1.0/24", "--allowed-host", "tts.lan")
    assert o.wyoming_allow == ("192.168.1.0/24",) and o.allowed_hosts == ("tts.lan",)
