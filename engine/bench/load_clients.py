"""Concurrent streaming clients against a speech server, bounded in count and time: each asks for
`frames` frames of pcm and reads the stream to its end; what each got (status, time to first audio
byte, bytes, seconds) comes back. The standard library's HTTP client, so nothing but the server is
measured (the bench; the load test drives the official client as well)."""
from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlsplit

from .text import BENCH_TEXT


def one_request(url: str, body: dict, key: str | None = None, timeout_s: float = 300.0) -> dict:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout_s)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    start = time.perf_counter()
    out = {"status": 0, "ttfa_s": None, "bytes": 0, "seconds": 0.0, "error": None}
    try:
        conn.request("POST", "/v1/audio/speech", json.dumps(body), headers)
        response = conn.getresponse()
        out["status"] = response.status
        while True:
            data = response.read1(65536)
            if not data:
                break
            if out["ttfa_s"] is None:
                out["ttfa_s"] = time.perf_counter() - start
            out["bytes"] += len(data)
    except (OSError, http.client.HTTPException) as e:
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    out["seconds"] = time.perf_counter() - start
    return out


def clients(url: str, count: int, frames: int, voice: str, key: str | None = None, model: str = "kazeia",
            timeout_s: float = 300.0, extra: dict | None = None) -> tuple[list[dict], float]:
    """`count` clients at once (started together); their results in order, and the wall time.
    `extra`: more fields of every request."""
    results: list[dict] = [{}] * count
    ready = threading.Barrier(count)

    def run(i: int) -> None:
        ready.wait()
        results[i] = one_request(url, {"model": model, "input": BENCH_TEXT, "voice": voice, "response_format": "pcm",
                                       "max_frames": frames, "seed": i, **(extra or {})}, key, timeout_s)
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 30)
    return results, time.perf_counter() - start
