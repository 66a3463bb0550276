"""`kazeia bench --batch 1,2,4,8`: many voices at once. For each batch size B, B requests (the bench
sentence, different seeds) run through one engine as one batch (Engine.take_many): per-stream
ms per frame of each stage (a talker or code-predictor step serves all B streams; the decoder runs
per stream), aggregate frames per second and RTF, and peak RSS (one copy of the weights, one KV
cache per session). Every size runs in the same call, B = 1 first, so ratios are side by side."""
from __future__ import annotations

import time

import numpy as np

from ..proc_stats import peak_rss_mb, reset_peak_rss
from ..synthesis.requests import ONE_PROMPT, Request, SamplingParams
from ..synthesis.engine import Engine
from ..synthesis.threads import available_cores, default_threads
from .models import model_path_for
from .text import BENCH_TEXT


def _run(engine: Engine, batch: int, frames: int) -> dict:
    requests = [Request(BENCH_TEXT, speaker="vivian", language="english",
                        sampling=SamplingParams.from_model(engine.info, seed=1 + i, max_frames=frames), plan=ONE_PROMPT)
                for i in range(batch)]
    reset_peak_rss()
    start = time.perf_counter()
    results = engine.take_many(requests, max_batch=batch)
    wall = time.perf_counter() - start
    n = sum(r.timings.frames for r in results)
    step = {s: float(np.mean([r.timings.mean_ms(s) for r in results])) for s in ("talker", "code_predictor")}
    decoder = float(np.mean([r.timings.mean_ms("decoder") for r in results]))
    audio_s = sum(r.timings.audio_seconds for r in results)
    return {
        "batch": batch, "frames": n, "wall_s": wall,
        # a step's launch serves every stream in it: its time is each stream's time per frame
        "step_ms": step, "decoder_ms_per_stream_frame": decoder,
        "talker_plus_code_predictor_frames_per_s": batch * 1000 / (step["talker"] + step["code_predictor"]),
        "aggregate_frames_per_s": n / wall, "aggregate_rtf": wall / audio_s,
        "prefill_ms_mean": float(np.mean([r.timings.prefill_ms for r in results])),
        "ttfa_ms_mean": float(np.mean([r.timings.ttfa_ms for r in results])),
        "peak_rss_mb": peak_rss_mb(),
    }


def bench_batch(sizes: tuple[int, ...] = (1, 2, 4, 8), size: str = "0.6b", out_type: str = "q8_0",
                decoder_type: str = "f16", frames: int = 24, threads: int | None = None, runs: int = 1,
                model_path: str | None = None, progress: bool = True) -> dict:
    if not sizes or any(b < 1 for b in sizes):
        raise ValueError("--batch takes positive batch sizes, e.g. 1,2,4,8")
    sizes = tuple(sorted(set(sizes) | {1}))   # B = 1 is the baseline of every ratio
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, out_type)
    engine = Engine.load(path, threads=threads)
    engine.warm_up()
    per_size: dict[int, list[dict]] = {b: [] for b in sizes}
    for _ in range(runs):   # sizes alternate within each round (this machine is shared)
        for b in sizes:
            per_size[b].append(_run(engine, b, frames))
    median = {b: sorted(r, key=lambda x: x["wall_s"])[(len(r) - 1) // 2] for b, r in per_size.items()}
    base = median[1]
    for b, m in median.items():
        m["lm_throughput_vs_1"] = m["talker_plus_code_predictor_frames_per_s"] / base["talker_plus_code_predictor_frames_per_s"]
        m["aggregate_throughput_vs_1"] = m["aggregate_frames_per_s"] / base["aggregate_frames_per_s"]
        if runs > 1:
            m["runs_wall_s"] = [r["wall_s"] for r in per_size[b]]
    return {"stage": "batch", "model": str(path), "size": engine.info.size_label, "type": engine.info.file_type,
            "threads": threads, "cores": available_cores(), "frames_per_stream": frames, "runs": runs,
            "batches": {str(b): m for b, m in median.items()}}
