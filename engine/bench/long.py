"""`kazeia bench --long`: a ~2,000-character, five-paragraph text (text.LONG_TEXT) spoken through the
long-text front end, its chunks batched (`--batch`, default 4) against the same chunks one at a time,
and the time to first audio against one sentence alone, alternating in one call, medians reported.
Random weights never end an utterance, so every chunk is given the frames an ordinary English pace
needs for its length (0.9 frames per character: ~14 characters a second at 12.5 frames a second)."""
from __future__ import annotations

import math
import time
from statistics import median_low
from dataclasses import replace

from ..synthesis.long_text import TakePlan
from ..synthesis.requests import Request
from ..synthesis.engine import Engine
from ..synthesis.threads import available_cores, default_threads
from .models import model_path_for
from .text import LONG_TEXT

FRAMES_PER_CHAR = 0.9


def frames_for(text: str, cap: int | None = None) -> int:
    frames = max(1, math.ceil(len(text) * FRAMES_PER_CHAR))
    return min(frames, cap) if cap else frames


def _speak(engine: Engine, plan: TakePlan, batch: int, cap: int | None) -> dict:
    result = engine.take(plan.with_max_frames(lambda chunk: frames_for(chunk.text, cap)), batcher=engine.batcher(batch))
    frames = sum(len(c.result.codes) for c in result.chunks)
    return {"wall_s": result.total_ms / 1000, "ttfa_ms": result.ttfa_ms, "frames": frames,
            "audio_s": result.audio_seconds, "rtf": result.rtf}


def _one_sentence(engine: Engine, plan: TakePlan, cap: int | None) -> dict:
    """The first chunk alone, streamed: the time to first audio a short request gets."""
    first = plan.chunks[0]
    start = time.perf_counter()
    stream = engine.open_take(replace(first, sampling=replace(first.sampling, max_frames=frames_for(first.text, cap))))
    next(iter(stream))
    ttfa = 1000 * (time.perf_counter() - start)
    stream.wait()
    return {"ttfa_ms": ttfa}


def bench_long(size: str = "0.6b", out_type: str = "q8_0", decoder_type: str = "f16", batch: int = 4,
               threads: int | None = None, runs: int = 1, model_path: str | None = None,
               frames_cap: int | None = None, progress: bool = True) -> dict:
    """`frames_cap` caps each chunk's frames (a quick look at a small model; None for the real figure)."""
    if batch < 2:
        raise ValueError("--long compares a batch with one chunk at a time: give --batch 2 or more")
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, out_type)
    engine = Engine.load(path, threads=threads)
    engine.warm_up()
    plan = engine.plan(Request(LONG_TEXT, speaker=engine.info.speakers[0].name, language="english"))
    rounds: dict[str, list[dict]] = {"one_at_a_time": [], "batched": [], "one_sentence": []}
    for r in range(runs):   # the three alternate within each round (this machine is shared)
        if progress:
            print(f"  round {r + 1}/{runs}", flush=True)
        rounds["one_at_a_time"].append(_speak(engine, plan, 1, frames_cap))
        rounds["batched"].append(_speak(engine, plan, batch, frames_cap))
        rounds["one_sentence"].append(_one_sentence(engine, plan, frames_cap))

    def median(kind: str, key: str) -> float:
        return median_low(x[key] for x in rounds[kind])

    seq, bat = median("one_at_a_time", "wall_s"), median("batched", "wall_s")
    single_ttfa = median("one_sentence", "ttfa_ms")
    return {"stage": "long", "model": str(path), "size": engine.info.size_label, "type": engine.info.file_type,
            "threads": threads, "cores": available_cores(), "runs": runs, "batch": batch,
            "characters": len(LONG_TEXT), "chunks": len(plan.chunks),
            "chunk_characters": [len(c.text) for c in plan.chunks],
            "frames": rounds["batched"][0]["frames"], "audio_s": rounds["batched"][0]["audio_s"],
            "one_at_a_time": {"wall_s": seq, "rtf": median("one_at_a_time", "rtf"),
                              "ttfa_ms": median("one_at_a_time", "ttfa_ms")},
            "batched": {"wall_s": bat, "rtf": median("batched", "rtf"), "ttfa_ms": median("batched", "ttfa_ms")},
            "one_sentence_ttfa_ms": single_ttfa,
            "batched_speedup": seq / bat, "ttfa_vs_one_sentence": median("batched", "ttfa_ms") / single_ttfa,
            "rounds": rounds}
