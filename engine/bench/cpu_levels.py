"""`kazeia bench --cpu LEVEL[,LEVEL...]`: the pipeline at other CPU levels of Kazeia's kernels
(KAZEIA_CPU) beside the default level, in one run. The level is fixed per process (weights are laid
out at load for one level's kernels), so each run is a `kazeia bench` subprocess; levels alternate
within each round and each reports its median run, with per-stage ratios to the default."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from .pipeline import _median_run

DEFAULT = "auto"


def _one_run(level: str, size: str, out_type: str, decoder_type: str, frames: int, threads: int | None,
             model_path: str | None, ggml_lib: str | None) -> dict:
    """`ggml_lib`: the folder of the ggml build this level runs on (None: the environment's)."""
    cmd = [sys.executable, "-m", "kazeia.engine", "bench", "--size", size, "--type", out_type, "--decoder-type",
           decoder_type, "--frames", str(frames), "--no-peers", "--no-reference", "--json", "-", "-q"]
    cmd += ["--threads", str(threads)] if threads else []
    cmd += ["--model", model_path] if model_path else []
    env = {**os.environ, "KAZEIA_CPU": level}
    if ggml_lib:   # another ggml build (the extension's RUNPATH yields to it)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (ggml_lib, env.get("LD_LIBRARY_PATH", "")) if p)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"bench at KAZEIA_CPU={level} failed: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)


def ggml_libs_by_level(spec: str | None, levels) -> dict[str, str | None]:
    """--ggml-lib: one DIR for every level but the default, or LEVEL=DIR pairs (comma-separated) for
    a build per level. ValueError names a level that is not being run or a folder that is missing."""
    out: dict[str, str | None] = {lv: None for lv in levels}
    if not spec:
        return out
    pairs = [p.strip() for p in spec.split(",") if p.strip()]
    if all("=" not in p for p in pairs) and len(pairs) == 1:
        pairs = [f"{lv}={pairs[0]}" for lv in levels if lv != DEFAULT]
    for pair in pairs:
        level, sep, folder = pair.partition("=")
        if not sep or level not in out or level == DEFAULT:
            raise ValueError(f"--ggml-lib {pair}: expected DIR or LEVEL=DIR for a level of --cpu "
                             f"({', '.join(lv for lv in levels if lv != DEFAULT)})")
        if not os.path.isdir(folder):
            raise ValueError(f"--ggml-lib {pair}: {folder} is not a folder")
        out[level] = folder
    return out


def bench_levels(levels: tuple[str, ...], size: str = "0.6b", out_type: str = "q8_0", decoder_type: str = "f16",
                 frames: int = 50, threads: int | None = None, runs: int = 1, model_path: str | None = None,
                 progress: bool = True, ggml_lib: str | None = None) -> dict:
    """`ggml_lib` (ggml_libs_by_level): another ggml build's libraries (e.g. one built for AVX2 alone)
    for the levels other than the default, or one per level, so that ggml's own kernels are capped
    too, as on a CPU that really stops at that level."""
    from ..platform_info import LEVELS, machine_info
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad:
        raise ValueError(f"--cpu {bad[0]}: choose among {', '.join(LEVELS)}")
    order = [DEFAULT, *[lv for lv in levels if lv != DEFAULT]]
    libs = ggml_libs_by_level(ggml_lib, order)
    seen: dict[str, list[dict]] = {lv: [] for lv in order}
    for i in range(runs):
        for lv in order if i % 2 == 0 else reversed(order):   # alternating: no level always goes first
            if progress:
                print(f"run {i + 1}/{runs} at KAZEIA_CPU={lv}", file=sys.stderr, flush=True)
            seen[lv].append(_one_run(lv, size, out_type, decoder_type, frames, threads, model_path, libs[lv]))
    out: dict = {"stage": "cpu_levels", "size": size, "type": out_type, "decoder_type": decoder_type, "frames": frames,
                 "runs": runs, "machine": machine_info(), "levels": {}}
    for lv, results in seen.items():
        best = _median_run([{**r["kazeia"], "_result": r} for r in results])
        r = best.pop("_result")
        out["levels"][lv] = {"cpu_level": r["machine"]["cpu_level"], "kernels_active": r["machine"]["kernels_active"],
                             "ggml_cpu_library": r["machine"]["ggml_cpu_library"],
                             "model": r["model"], "threads": r["threads"], **best,
                             "ratio_to_roofline": r["roofline"]["ratio_to_roofline"],
                             "bandwidth_probes_gbs": r["roofline"]["bandwidth_probes_gbs"],
                             "runs_total_ms_per_frame": [x["kazeia"]["total_ms_per_frame"] for x in results],
                             "runs_rtf": [x["kazeia"]["rtf"] for x in results]}
        out["model"], out["threads"] = r["model"], r["threads"]
    base = out["levels"][DEFAULT]
    for lv, d in out["levels"].items():
        d["vs_default"] = {**{s: d["ms_per_frame"][s] / base["ms_per_frame"][s] for s in base["ms_per_frame"]},
                           "total": d["total_ms_per_frame"] / base["total_ms_per_frame"],
                           "prefill": d["prefill_ms"] / base["prefill_ms"], "rtf": d["rtf"] / base["rtf"]}
    return out
