"""`kazeia bench --agent`: simulated language models write an answer at `rates` tokens a second (0: all
at once, a burst) to 1..N sockets at once, through the speech server on loopback, spoken two ways
side by side in alternating rounds:
- live: Kazeia's live socket, every word sent as it is written, the whole answer's take (flush at the end);
- sentences: what servers that take streamed text do, each sentence a request once it is complete,
  one after another (their audio must play in order).
Per case: time from the first word sent to the first audio (p50/p95 over the sockets and rounds; the
writer's time for that first word is not counted);
stalls once speech has started (a listener playing the audio as it comes, in real time, runs out:
count and total ms); audio seconds per wall second. Then what a waiting session costs the others:
one stream's ms per frame alone and beside `waiting` live turns with all their text read. `holds`:
live turns that start once the text holds that much reading (the socket's hold_ms), the policy that
trades first audio for stalls when the writer is slower than the model reads."""
from __future__ import annotations

import http.client
import json
import re
import threading
import time
from statistics import median_low
from urllib.parse import urlsplit

from ..serve.app import ServerSettings, create_app
from ..serve.local import LocalServer
from ..serve.voices import VoiceBook
from ..synthesis.engine import Engine
from ..text.sentences import split_sentences
from ..synthesis.threads import available_cores, default_threads
from .models import model_path_for
from .serve import percentile

ANSWER = ("Sure, here is the short version. The train leaves at nine from platform four, and the trip takes "
          "about two hours. Bring a jacket, because the mountains are cold in the evening.")
MODES = ("live", "sentences")


def paced_pieces(engine: Engine, text: str, rate: float) -> list[tuple[float, str]]:
    """(seconds after the start, piece): the text a word at a time (its spaces kept), each sent once
    the writer has written its tokens at `rate` tokens a second (0: all at once)."""
    pieces = re.findall(r"\S+\s*", text)
    out, written = [], ""
    for piece in pieces:
        written += piece
        out.append((engine.count_text_tokens(written) / rate if rate else 0.0, piece))
    return out


def stalls(arrivals: list[tuple[float, int]], bytes_per_s: float) -> tuple[int, float]:
    """A listener who plays the audio as it comes from its first byte: how often it ran out, and for
    how many ms in all (each arrival after the buffer ran dry)."""
    count, total, buffer_end = 0, 0.0, None
    for t, n in arrivals:
        if buffer_end is None:
            buffer_end = t
        if t > buffer_end + 1e-3:
            count += 1
            total += t - buffer_end
            buffer_end = t
        buffer_end += n / bytes_per_s
    return count, 1000 * total


def _write(pieces, start: float, send) -> None:
    for at, piece in pieces:
        delay = start + at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(piece)


def live_client(ws_url: str, pieces, frames: int, start: float, hold_ms: float = 0.0) -> dict:
    from websockets.sync.client import connect
    with connect(ws_url + f"&max_frames={frames}" + (f"&hold_ms={hold_ms:g}" if hold_ms else "")) as ws:
        json.loads(ws.recv())   # ready

        def write() -> None:
            _write(pieces, start, lambda t: ws.send(json.dumps({"type": "text", "text": t})))
            ws.send(json.dumps({"type": "flush"}))
        writer = threading.Thread(target=write, daemon=True)
        while time.perf_counter() < start:
            time.sleep(0.001)
        writer.start()
        arrivals = []
        while True:
            message = ws.recv(timeout=300)
            if isinstance(message, bytes):
                arrivals.append((time.perf_counter() - start, len(message)))
            elif json.loads(message)["type"] in ("turn.end", "error"):
                break
        writer.join()
        ws.send(json.dumps({"type": "close"}))
    return {"arrivals": arrivals, "end_s": time.perf_counter() - start}


def _request(url: str, body: dict, start: float, arrivals: list) -> None:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    try:
        conn.request("POST", "/v1/audio/speech", json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        while data := response.read1(65536):
            arrivals.append((time.perf_counter() - start, len(data)))
    finally:
        conn.close()


def sentences_client(url: str, pieces, voice: str, frames: int, tokens: int, engine: Engine, start: float) -> dict:
    """Sentences as requests as each completes (the last at the end), one after another."""
    done, lock, pending, text = threading.Event(), threading.Lock(), [], [""]

    def send(piece: str) -> None:
        with lock:
            text[0] += piece
            found = split_sentences(text[0], "english")
            while len(found) > 1:   # (the last may still grow)
                pending.append(found.pop(0))
                text[0] = text[0][text[0].index(found[0]):]

    def write() -> None:
        _write(pieces, start, send)
        with lock:
            if text[0].strip():
                pending.append(text[0].strip())
        done.set()
    while time.perf_counter() < start:
        time.sleep(0.001)
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    arrivals: list = []
    while True:
        with lock:
            item = pending.pop(0) if pending else None
        if item is None:
            if done.is_set() and not pending:
                break
            time.sleep(0.002)
            continue
        share = max(1, round(frames * engine.count_text_tokens(item) / tokens))   # (the frames, shared)
        _request(url, {"model": "kazeia", "input": item, "voice": voice, "response_format": "pcm",
                       "max_frames": share}, start, arrivals)
    writer.join()
    return {"arrivals": arrivals, "end_s": time.perf_counter() - start}


def _until_still(engine: Engine, quiet_s: float = 0.3) -> None:
    """Until the batch worker has made no step for `quiet_s` (every session waits for text)."""
    batcher, last, since = engine.shared_batcher, -1, time.perf_counter()
    while time.perf_counter() - since < quiet_s:
        if batcher.steps != last:
            last, since = batcher.steps, time.perf_counter()
        time.sleep(0.02)


def waiting_cost(engine: Engine, voice: str, frames: int, waiting: int, runs: int) -> dict:
    """ms per frame of one stream alone, and beside `waiting` streams with nothing left to read."""
    from ..synthesis.requests import ONE_PROMPT, Request, SamplingParams
    sampling = SamplingParams.from_model(engine.info, max_frames=frames)
    times: dict[str, list[float]] = {"alone": [], "beside_waiting": []}
    for _ in range(runs):
        for case in times:
            idle = []
            if case == "beside_waiting":
                for _ in range(waiting):
                    s = engine.open_take(Request("", speaker=voice, sampling=sampling), text_open=True)
                    s.write("Still thinking about")
                    idle.append(s)
                _until_still(engine)   # (their prefill and first frames are theirs: timed is the wait)
            start = time.perf_counter()
            result = engine.open_take(Request(ANSWER, speaker=voice, sampling=sampling, streaming_text=True,
                                              plan=ONE_PROMPT)).wait()
            seconds = time.perf_counter() - start
            for s in idle:
                s.cancel()
            times[case].append(1000 * seconds / len(result.codes))
    alone, beside = median_low(times["alone"]), median_low(times["beside_waiting"])
    return {"waiting_streams": waiting, "frames": frames, "ms_per_frame_alone": alone,
            "ms_per_frame_beside_waiting": beside, "ratio": beside / alone, "runs_ms_per_frame": times}


def bench_agent(size: str = "0.6b", out_type: str = "q8_0", decoder_type: str = "f16",
                rates: tuple[float, ...] = (10, 30, 100, 0), counts: tuple[int, ...] = (1, 4), frames: int = 120,
                threads: int | None = None, runs: int = 1, model_path: str | None = None,
                progress: bool = True, holds: tuple[float, ...] = (0.0,)) -> dict:
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, out_type)
    most = max(counts)
    engine = Engine.load(path, threads=threads, max_batch=most)
    engine.warm_up()
    voice = engine.info.speakers[0].name
    tokens = engine.count_text_tokens(ANSWER)
    bytes_per_s = 2 * engine.info.sample_rate
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("kazeia", max_batch=most, max_queue=most))
    cases = [(rate, n, mode, hold) for rate in rates for n in counts for mode in MODES
             for hold in (holds if mode == "live" else (0.0,))]
    measured: dict[tuple, list[dict]] = {case: [] for case in cases}
    with LocalServer(app) as server:
        ws_url = server.url.replace("http", "ws") + f"/v1/audio/speech/live?voice={voice}"
        for r in range(runs):
            for rate, n, mode, hold in cases:
                if progress:
                    print(f"  round {r + 1}/{runs}: {rate or 'burst'} tokens/s, {n} socket(s), {mode}"
                          + (f", hold {hold:g} ms" if hold else ""), flush=True)
                pieces = paced_pieces(engine, ANSWER, rate)
                start = time.perf_counter() + 0.05   # (every client begins at once)
                results: list[dict] = [{}] * n

                def client(i: int) -> None:
                    results[i] = (live_client(ws_url, pieces, frames, start, hold) if mode == "live" else
                                  sentences_client(server.url, pieces, voice, frames, tokens, engine, start))
                workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
                for w in workers:
                    w.start()
                for w in workers:
                    w.join(600)
                wall = max(x["end_s"] for x in results)
                first_word = pieces[0][0]   # (what the writer took for the first word is not the speech's)
                measured[(rate, n, mode, hold)].append({
                    "ttfa_s": [x["arrivals"][0][0] - first_word if x["arrivals"] else None for x in results],
                    "stalls": [stalls(x["arrivals"], bytes_per_s) for x in results],
                    "audio_s": sum(b for x in results for _, b in x["arrivals"]) / bytes_per_s, "wall_s": wall})
        if progress:
            print(f"  one stream alone and beside {most - 1 or 1} waiting", flush=True)
        cost = waiting_cost(engine, voice, frames, max(1, most - 1), runs)
    rows = []
    for (rate, n, mode, hold), rounds in measured.items():
        ttfa = [t for x in rounds for t in x["ttfa_s"] if t is not None]
        stall_counts = [c for x in rounds for c, _ in x["stalls"]]
        stall_ms = [ms for x in rounds for _, ms in x["stalls"]]
        rows.append({"rate_tokens_per_s": rate or None, "sockets": n, "mode": mode, "hold_ms": hold,
                     "ttfa_p50_s": percentile(ttfa, 0.5) if ttfa else None,
                     "ttfa_p95_s": percentile(ttfa, 0.95) if ttfa else None,
                     "stalls_per_socket": median_low(stall_counts), "stall_ms_per_socket": median_low(stall_ms),
                     "audio_s_per_wall_s": median_low([x["audio_s"] / x["wall_s"] for x in rounds])})
    return {"stage": "agent", "model": str(path), "size": engine.info.size_label, "type": engine.info.file_type,
            "threads": threads, "cores": available_cores(), "runs": runs, "frames": frames,
            "answer_tokens": tokens, "cases": rows, "waiting": cost,
            "rounds": [{"rate": k[0], "sockets": k[1], "mode": k[2], "hold_ms": k[3], "measured": v}
                       for k, v in measured.items()]}
