"""`kazeia bench --overlap`: the decoder beside generation against the stages taking turns, on one
engine, alternating within each round (this machine is shared): wall time per frame, RTF, TTFA,
each stage's time per frame as it ran, the threads each side had, and whether the two gave the same
audio (they must, bit for bit). Offline synthesis (Engine.take) and streaming (Engine.open_take) both."""
from __future__ import annotations

import time

import numpy as np

from ..synthesis.overlap import decoder_threads
from ..synthesis.requests import ONE_PROMPT, Request, SamplingParams
from ..synthesis.engine import Engine
from ..synthesis.threads import available_cores, default_threads
from .models import decoder_type_of, model_path_for
from .report import STAGES
from .text import BENCH_TEXT


def _run(engine: Engine, sampling: SamplingParams, streamed: bool) -> tuple[dict, np.ndarray]:
    request = Request(BENCH_TEXT, "vivian", "english", sampling=sampling, plan=ONE_PROMPT)
    start = time.perf_counter()
    if streamed:
        stream = engine.open_take(request)
        for _ in stream:
            pass
        result = stream.result
    else:
        result = engine.take(request)
    wall = time.perf_counter() - start
    t = result.timings
    return ({"wall_ms_per_frame": 1000 * wall / t.frames, "rtf": t.rtf, "ttfa_ms": t.ttfa_ms, "prefill_ms": t.prefill_ms,
             "ms_per_frame": {s: t.mean_ms(s) for s in STAGES}, "frames": t.frames}, result.audio)


def bench_overlap(size: str = "0.6b", out_type: str = "q8_0", decoder_type: str = "f16", frames: int = 50,
                  threads: int | None = None, runs: int = 3, model_path: str | None = None,
                  progress: bool = True) -> dict:
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, out_type)
    engine = Engine.load(path, threads=threads)
    sampling = SamplingParams.from_model(engine.info, seed=1, max_frames=frames)
    modes = {"turns": False, "overlapped": True}
    for overlap in modes.values():   # each side's one-time costs (graphs, buffers, pages) paid first
        engine.set_overlap(overlap)
        engine.warm_up()
    result = {"stage": "overlap", "model": str(path), "size": engine.info.size_label, "type": engine.info.file_type,
              "decoder_type": decoder_type_of(engine.info), "threads": threads, "cores": available_cores(),
              "frames": frames, "runs": runs,
              "split_when_overlapped": {"generation": threads - decoder_threads(threads),
                                        "decoder": decoder_threads(threads)}}
    for kind, streamed in (("offline", False), ("streamed", True)):
        runs_of: dict[str, list[dict]] = {m: [] for m in modes}
        audio: dict[str, np.ndarray] = {}
        for r in range(runs):
            order = list(modes) if r % 2 == 0 else list(reversed(modes))   # alternating: neither always first
            for name in order:
                engine.set_overlap(modes[name])
                run, audio[name] = _run(engine, sampling, streamed)
                runs_of[name].append(run)
        median = {m: sorted(v, key=lambda x: x["wall_ms_per_frame"])[(len(v) - 1) // 2] for m, v in runs_of.items()}
        for m, v in runs_of.items():
            median[m]["runs_wall_ms_per_frame"] = [x["wall_ms_per_frame"] for x in v]
            median[m]["runs_ttfa_ms"] = [x["ttfa_ms"] for x in v]
        result[kind] = {**median, "same_audio": bool(np.array_equal(audio["turns"], audio["overlapped"])),
                        "overlap_gain": median["turns"]["wall_ms_per_frame"] / median["overlapped"]["wall_ms_per_frame"]}
    engine.set_overlap(False)
    return result
