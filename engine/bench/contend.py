"""`kazeia bench --contend N`: speed on a busy machine. N CPU-bound processes, each pinned to one of
this process's cores (the last ones), run while the pipeline is timed; idle and contended runs
alternate in the same call, at the default thread policy (all cores, fewer while other processes
hold some: threads.ThreadPolicy) and at a fixed count of every core, so the ratios hold on a
machine that is doing something else too."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time

from ..synthesis.requests import ONE_PROMPT, Request, SamplingParams
from ..synthesis.engine import Engine
from ..synthesis.threads import available_cores, default_threads
from .models import model_path_for
from .text import BENCH_TEXT

SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


@contextlib.contextmanager
def contention(n: int):
    """n busy processes pinned to this process's last n cores (they die with the block)."""
    cores = sorted(os.sched_getaffinity(0))
    if not 0 <= n <= len(cores):
        raise ValueError(f"--contend {n}: this process may use {len(cores)} core(s)")
    procs = [subprocess.Popen([sys.executable, "-c", SPIN, str(c)]) for c in cores[len(cores) - n:]]
    try:
        time.sleep(0.3)   # running before the first frame
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _run(engine: Engine, frames: int) -> dict:
    sampling = SamplingParams.from_model(engine.info, seed=1, max_frames=frames)
    stream = engine.open_take(Request(BENCH_TEXT, "vivian", "english", sampling=sampling, plan=ONE_PROMPT))
    for _ in stream:
        pass
    t = stream.result.timings
    return {"rtf": t.rtf, "ttfa_ms": t.ttfa_ms, "prefill_ms": t.prefill_ms, "frames": t.frames,
            "ms_per_frame": {s: t.mean_ms(s) for s in ("talker", "code_predictor", "decoder")},
            "active_threads_at_end": engine.thread_policy.active, "policy_switches": engine.thread_policy.switches}


def _median(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda r: r["rtf"])[(len(runs) - 1) // 2]


def bench_contend(n: int = 1, size: str = "0.6b", out_type: str = "q8_0", decoder_type: str = "f16",
                  frames: int = 48, runs: int = 2, threads: int | None = None, model_path: str | None = None,
                  progress: bool = True) -> dict:
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, out_type)
    policies = {"default": Engine.load(path, threads=threads), "fixed": Engine.load(path, threads=threads)}
    policies["fixed"].thread_policy.adaptive = False   # every launch on every thread, whatever runs beside
    for engine in policies.values():
        engine.warm_up()
    results = {name: {"idle": [], "contended": []} for name in policies}
    for _ in range(runs):   # alternating: both conditions see the same machine
        for name, engine in policies.items():
            results[name]["idle"].append(_run(engine, frames))
        with contention(n):
            for name, engine in policies.items():
                results[name]["contended"].append(_run(engine, frames))
    info = policies["default"].info
    out = {"stage": "contend", "model": str(path), "size": info.size_label, "type": info.file_type,
           "threads": threads, "cores": available_cores(), "contend": n,
           "frames": frames, "runs": runs, "policies": {}}
    for name, r in results.items():
        idle, busy = _median(r["idle"]), _median(r["contended"])
        out["policies"][name] = {"idle": idle, "contended": busy, "contended_over_idle_rtf": busy["rtf"] / idle["rtf"],
                                 "runs_rtf": {k: [x["rtf"] for x in v] for k, v in r.items()}}
    out["default_contended_over_fixed_idle_rtf"] = (out["policies"]["default"]["contended"]["rtf"] /
                                                    out["policies"]["fixed"]["idle"]["rtf"])
    return out
