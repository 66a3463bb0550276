"""`kazeia bench --serve --clients 1,2,4,8`: the speech server on loopback (in this process, the
engine batching up to the most clients) with that many concurrent streaming clients, each asking for
`--frames` frames of pcm; rounds alternate the client counts, medians reported. Per count: p50/p95
time to first audio byte, aggregate audio throughput (audio seconds per wall second, and against one
client), and responses lost or short (none expected: the queue admits them all); for both prompts a
request can have (text fed while generating, the server's default; the whole text)."""
from __future__ import annotations

from statistics import median_low

from ..serve.app import ServerSettings, create_app
from .load_clients import clients as run_clients
from ..serve.local import LocalServer
from ..serve.voices import VoiceBook
from ..synthesis.engine import Engine
from ..synthesis.threads import available_cores, default_threads
from .models import model_path_for


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


FEEDS = {"streaming_text": True, "whole_text": False}   # the server's default first


def bench_serve(counts: tuple[int, ...] = (1, 2, 4, 8), size: str = "0.6b", out_type: str = "q8_0",
                decoder_type: str = "f16", frames: int = 100, threads: int | None = None, runs: int = 1,
                model_path: str | None = None, progress: bool = True) -> dict:
    """Both prompts a request can have, side by side in the same rounds: text fed while generating
    (the server's default) and the whole text in the prompt (the reference wrapper's for CustomVoice)."""
    counts = tuple(sorted(set(counts) | {1}))
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, out_type)
    engine = Engine.load(path, threads=threads, max_batch=max(counts))
    engine.warm_up()
    voice = engine.info.speakers[0].name
    app = create_app(engine, VoiceBook(engine.model), ServerSettings("kazeia", max_batch=max(counts), max_queue=0))
    sample_bytes = 2 * engine.info.sample_rate
    expected = frames * int(engine.info.sample_rate / engine.info.frame_rate) * 2
    rounds: dict[str, dict[int, list[dict]]] = {feed: {n: [] for n in counts} for feed in FEEDS}
    with LocalServer(app) as server:
        run_clients(server.url, 1, 2, voice)   # the server's own first-request costs
        for r in range(runs):
            for n in counts:
                for feed, fed in FEEDS.items():
                    if progress:
                        print(f"  round {r + 1}/{runs}: {n} client(s), {feed.replace('_', ' ')}", flush=True)
                    results, wall = run_clients(server.url, n, frames, voice, extra={"streaming_text": fed})
                    audio_s = sum(x["bytes"] for x in results) / sample_bytes
                    rounds[feed][n].append({"wall_s": wall, "audio_s": audio_s, "throughput": audio_s / wall,
                                            "ttfa_s": [x["ttfa_s"] for x in results if x["ttfa_s"] is not None],
                                            "lost": sum(1 for x in results
                                                        if x["status"] != 200 or x["bytes"] != expected)})
    by_feed = {feed: _per_count(rounds[feed], runs) for feed in FEEDS}
    return {"stage": "serve", "model": str(path), "size": engine.info.size_label, "type": engine.info.file_type,
            "threads": threads, "cores": available_cores(), "runs": runs, "frames": frames,
            "clients": by_feed["streaming_text"], "whole_text_clients": by_feed["whole_text"],
            "rounds": {feed: {str(n): v for n, v in by_count.items()} for feed, by_count in rounds.items()}}


def _per_count(rounds: dict[int, list[dict]], runs: int) -> dict:
    by_count = {}
    for n, measured in rounds.items():
        ttfa = [t for x in measured for t in x["ttfa_s"]]
        by_count[str(n)] = {"throughput": median_low([x["throughput"] for x in measured]),
                            "ttfa_p50_s": percentile(ttfa, 0.5) if ttfa else None,
                            "ttfa_p95_s": percentile(ttfa, 0.95) if ttfa else None,
                            "lost": sum(x["lost"] for x in measured), "requests": n * runs}
    one = by_count["1"]["throughput"]
    for d in by_count.values():
        d["vs_one_client"] = d["throughput"] / one
        d["rtf"] = 1 / d["throughput"]
    return by_count
