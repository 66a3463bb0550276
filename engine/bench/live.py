"""`kazeia bench --live`: an LLM's answer written a word at a time (`words_per_s`) and spoken three
ways through the speech server on loopback, rounds alternating, medians reported:
- live: Kazeia's live socket, every word sent as it is written, one utterance (flush at the end);
- sentences: what servers that take streamed text do, each sentence a request once it is complete,
  one after another (their audio must play in order);
- whole: one request once the whole answer is written.
Time to first audio counts from the first word written. Then what a waiting session costs the
others: one stream's frames alone, and beside `waiting` live streams whose turn is open with all its
text read (sessions the batch worker skips), alternating."""
from __future__ import annotations

import json
import threading
import time
from statistics import median_low

from ..serve.app import ServerSettings, create_app
from ..serve.local import LocalServer
from ..serve.voices import VoiceBook
from ..synthesis import Engine
from ..text.sentences import split_sentences
from ..threads import available_cores, default_threads
from .load_clients import one_request
from .models import model_path_for

ANSWER = ("Sure, here is the short version. The train leaves at nine from platform four, and the trip takes "
          "about two hours. Bring a jacket, because the mountains are cold in the evening.")
MODES = ("live", "sentences", "whole")


def _written(words: list[str], gap_s: float, send) -> None:
    """The LLM: one word every `gap_s` seconds (the spaces as in the text)."""
    for i, word in enumerate(words):
        send(word if i == 0 else " " + word)
        time.sleep(gap_s)


def _live(ws_url: str, words: list[str], gap_s: float, frames: int) -> dict:
    from websockets.sync.client import connect
    with connect(ws_url + f"&max_frames={frames}") as ws:
        json.loads(ws.recv())   # ready
        start = time.perf_counter()

        def write():
            _written(words, gap_s, lambda t: ws.send(json.dumps({"type": "text", "text": t})))
            ws.send(json.dumps({"type": "flush"}))
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        first, audio_bytes = None, 0
        while True:
            message = ws.recv(timeout=300)
            if isinstance(message, bytes):
                first = first if first is not None else time.perf_counter() - start
                audio_bytes += len(message)
            elif json.loads(message)["type"] in ("turn.end", "error"):
                break
        writer.join()
        ws.send(json.dumps({"type": "close"}))
    return {"ttfa_s": first, "end_s": time.perf_counter() - start, "audio_bytes": audio_bytes}


def _by_requests(url: str, words: list[str], gap_s: float, voice: str, frames_per_word: float,
                 per_sentence: bool) -> dict:
    """Requests of whole sentences as each completes (per_sentence), or of the whole answer at its end."""
    pending: list[str] = []
    done = threading.Event()
    lock = threading.Lock()
    text = ""

    def send(piece: str) -> None:
        nonlocal text
        with lock:
            text += piece
            if per_sentence:
                sentences = split_sentences(text, "english")
                while len(sentences) > 1:   # (the last may still grow)
                    pending.append(sentences.pop(0))
                    text = text[text.index(sentences[0]):]
    start = time.perf_counter()

    def write():
        nonlocal text
        _written(words, gap_s, send)
        with lock:
            if text.strip():
                pending.append(text.strip())
        done.set()
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    first, audio_bytes = None, 0
    while True:
        with lock:
            item = pending.pop(0) if pending else None
        if item is None:
            if done.is_set() and not pending:
                break
            time.sleep(0.005)
            continue
        frames = max(1, round(frames_per_word * len(item.split())))
        out = one_request(url, {"model": "kazeia", "input": item, "voice": voice, "response_format": "pcm",
                                "max_frames": frames})
        if first is None and out["ttfa_s"] is not None:
            first = time.perf_counter() - start - (out["seconds"] - out["ttfa_s"])
        audio_bytes += out["bytes"]
    writer.join()
    return {"ttfa_s": first, "end_s": time.perf_counter() - start, "audio_bytes": audio_bytes}


def _until_still(engine: Engine, quiet_s: float = 0.3) -> None:
    """Until the batch worker has made no step for `quiet_s` (every session waits for text)."""
    batcher, last, since = engine._batcher, -1, time.perf_counter()
    while time.perf_counter() - since < quiet_s:
        if batcher.steps != last:
            last, since = batcher.steps, time.perf_counter()
        time.sleep(0.02)


def _waiting_cost(engine: Engine, voice: str, frames: int, waiting: int, runs: int) -> dict:
    """ms per frame of one stream alone, and beside `waiting` streams with nothing left to read."""
    from ..requests import SamplingParams
    sampling = SamplingParams.from_model(engine.info, max_frames=frames)
    times: dict[str, list[float]] = {"alone": [], "beside_waiting": []}
    for _ in range(runs):
        for case in times:
            idle = []
            if case == "beside_waiting":
                for _ in range(waiting):
                    s = engine.open_text_stream(speaker=voice, sampling=sampling)
                    s.write("Still thinking about")
                    idle.append(s)
                _until_still(engine)   # (their prefill and first frames are theirs: timed is the wait)
            start = time.perf_counter()
            stream = engine.stream(ANSWER, speaker=voice, sampling=sampling, streaming_text=True, one_prompt=True)
            made = sum(1 for _ in stream)
            result = stream.wait()
            seconds = time.perf_counter() - start
            for s in idle:
                s.cancel()
            assert made and result is not None
            times[case].append(1000 * seconds / len(result.codes))
    alone, beside = median_low(times["alone"]), median_low(times["beside_waiting"])
    return {"waiting_streams": waiting, "frames": frames, "ms_per_frame_alone": alone,
            "ms_per_frame_beside_waiting": beside, "ratio": beside / alone,
            "runs_ms_per_frame": times}


def bench_live(size: str = "0.6b", out_type: str = "q8_0", decoder_type: str = "f16", words_per_s: float = 8.0,
               frames: int = 120, waiting: int = 3, threads: int | None = None, runs: int = 1,
               model_path: str | None = None, progress: bool = True) -> dict:
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, out_type)
    engine = Engine.load(path, threads=threads, max_batch=waiting + 1)
    engine.warm_up()
    voice = engine.info.speakers[0].name
    words = ANSWER.split(" ")
    gap_s = 1.0 / words_per_s
    frames_per_word = frames / len(words)   # (random weights never end a take: each request gets its share)
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("kazeia", max_batch=waiting + 1, max_queue=4))
    rounds: dict[str, list[dict]] = {mode: [] for mode in MODES}
    with LocalServer(app) as server:
        ws_url = server.url.replace("http", "ws") + f"/v1/audio/speech/live?voice={voice}"
        for r in range(runs):
            for mode in MODES:
                if progress:
                    print(f"  round {r + 1}/{runs}: {mode}", flush=True)
                if mode == "live":
                    rounds[mode].append(_live(ws_url, words, gap_s, frames))
                else:
                    rounds[mode].append(_by_requests(server.url, words, gap_s, voice, frames_per_word,
                                                     per_sentence=mode == "sentences"))
        if progress:
            print(f"  one stream alone and beside {waiting} waiting", flush=True)
        cost = _waiting_cost(engine, voice, frames, waiting, runs)
    sample_bytes = 2 * engine.info.sample_rate
    modes = {mode: {"ttfa_s": median_low([x["ttfa_s"] for x in rounds[mode]]),
                    "end_s": median_low([x["end_s"] for x in rounds[mode]]),
                    "audio_s": median_low([x["audio_bytes"] for x in rounds[mode]]) / sample_bytes}
             for mode in MODES}
    return {"stage": "live", "model": str(path), "size": engine.info.size_label, "type": engine.info.file_type,
            "threads": threads, "cores": available_cores(), "runs": runs, "frames": frames,
            "words": len(words), "words_per_s": words_per_s, "writing_s": len(words) * gap_s,
            "modes": modes, "waiting": cost, "rounds": rounds}
