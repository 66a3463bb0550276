"""`kazeia bench` for the whole pipeline: per-stage ms per frame, prefill, TTFA, RTF, peak RSS,
the memory-bandwidth roofline of talker + code predictor, the decoder's GFLOP/s, quantisation
divergence against f32, and the PyTorch reference and the peer engines (vox-tts, qwen3synth) measured
side by side in the same run."""
from __future__ import annotations

import concurrent.futures
import os
import time

import numpy as np

from ..model_files.gguf_file import TypeMix
from ..model_files.model_file import ModelFile
from ..proc_stats import peak_rss_mb, reset_peak_rss
from ..synthesis.requests import ONE_PROMPT, Request, SamplingParams
from ..synthesis.engine import Engine
from ..synthesis.threads import available_cores, default_threads
from .compute import decoder_compute
from .divergence import divergence
from .models import bench_model, converted, decoder_type_of, model_path_for, same_size, shared_checkpoint
from .peers import onnxruntime_python, pipeline_peers, reference_tts, vox_python
from .text import BENCH_TEXT

def read_bandwidth_gbs(threads: int, megabytes: int = 256) -> float:
    """Streaming read bandwidth, best of three reads of a buffer eight times the L3 of a large CPU
    (numpy reductions release the GIL; one slice per thread)."""
    data = np.ones(megabytes * 2 ** 20 // 4, np.float32)
    parts = np.array_split(data, threads)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(np.sum, parts))   # warm-up: page in
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            list(pool.map(np.sum, parts))
            best = min(best, time.perf_counter() - start)
    return data.nbytes / best / 1e9


def weight_bytes_per_frame(model: ModelFile) -> dict:
    """Bytes of weights one frame streams from memory: the talker once (plus the text projection for
    the trailing text row), the code predictor's layers 15 times and each of its heads once."""
    hp = model.info.hparams
    groups = hp["talker"]["num_code_groups"] - 1
    specs = model.native.tensor_specs()
    nbytes = {s["name"]: model.native.tensor_nbytes(s["name"]) for s in specs}
    talker = sum(b for n, b in nbytes.items() if n.startswith(("talker.blk.", "talker.output_norm", "talker.codec_head",
                                                                "talker.text_proj.")))
    cp_body = sum(b for n, b in nbytes.items() if n.startswith(("cp.blk.", "cp.output_norm", "cp.input_proj")))
    cp_heads = sum(b for n, b in nbytes.items() if n.startswith("cp.head."))
    return {"talker": talker, "code_predictor": groups * cp_body + cp_heads}


def rtf_floor(kazeia: dict, frames: int, frame_rate: float, roofline_ms: float, compute: dict) -> dict:
    """The RTF this machine allowed at the moment of the runs: talker + code predictor at the
    roofline of the bandwidth probed around them, the decoder at the best GEMM peak measured here,
    and the prefill as it ran. No engine does better on that hardware at that moment; the rest of
    the run's RTF is the engine's own overhead."""
    peak = max(compute["gemm_peak_gflops"], compute.get("kernel_peak_gflops") or 0.0)
    decoder_ms = compute["gflop_per_frame"] / peak * 1000
    floor = (kazeia["prefill_ms"] / frames + roofline_ms + decoder_ms) * frame_rate / 1000
    return {"talker_plus_code_predictor_roofline_ms": roofline_ms, "decoder_at_gemm_peak_ms": decoder_ms,
            "prefill_ms_as_run": kazeia["prefill_ms"], "rtf": floor, "ratio": kazeia["rtf"] / floor}


def _median_run(runs: list[dict]) -> dict:
    """The run with the median total (ties: the earlier), so its stages add up."""
    return sorted(runs, key=lambda r: r["total_ms_per_frame"])[(len(runs) - 1) // 2]


def bench_tts(size: str = "0.6b", out_type: str = "q8_0", decoder_type: str = "f16", frames: int = 40,
              threads: int | None = None, reference: bool = True, divergence_types: tuple[str, ...] = (),
              model_path: str | None = None, progress: bool = True, peers: bool = True, runs: int = 1) -> dict:
    """`runs` > 1 alternates Kazeia's and each peer's runs and reports each one's median run (this
    machine is shared: identical runs differ by up to a third)."""
    threads = threads or default_threads()
    out_type = str(TypeMix.parse(out_type, fallback="q8_0"))
    divergence_types = tuple(str(TypeMix.parse(q, fallback="q8_0")) for q in divergence_types)
    if runs < 1:
        raise ValueError("runs must be at least 1")
    if model_path and divergence_types:
        raise ValueError("--divergence compares the bench's own models of every type; it cannot use --model")
    shared, why_not_shared = _shared_checkpoint(size, model_path, peers, progress)

    def model_for(t: str, dec: str) -> Path:
        return converted(shared, t, dec, progress) if shared else bench_model(size, dec, progress, out_type=t)

    # every file is made before anything is timed, and written out (no writeback during a run)
    path = model_path_for(model_path, size, decoder_type, progress, out_type) if model_path else \
        model_for(out_type, decoder_type)
    peer_runs = pipeline_peers(shared, threads) if shared else {}
    prepared = {name: run(0) for name, run in peer_runs.items()}
    if hasattr(os, "sync"):
        os.sync()
    reset_peak_rss()
    engine = Engine.load(path, threads=threads)
    engine.warm_up()
    ours, theirs, probes, peak_mb = _alternating_runs(engine, frames, threads, runs, peer_runs, prepared)
    bandwidth = {"1": read_bandwidth_gbs(1), str(threads): float(np.median(probes))}
    kazeia = {**_median_run(ours), "peak_rss_mb": peak_mb}
    if runs > 1:
        kazeia["runs_total_ms_per_frame"] = [r["total_ms_per_frame"] for r in ours]
        kazeia["runs_ttfa_ms"] = [r["ttfa_ms"] for r in ours]   # in run order, like the totals
        kazeia["runs_rtf"] = [r["rtf"] for r in ours]
    per_frame = kazeia["ms_per_frame"]
    wbytes = weight_bytes_per_frame(engine.model)
    roofline_ms = (wbytes["talker"] + wbytes["code_predictor"]) / (bandwidth[str(threads)] * 1e9) * 1000
    lm_ms = per_frame["talker"] + per_frame["code_predictor"]
    result = {
        "stage": "all", "model": str(path), "size": engine.info.size_label, "type": engine.info.file_type,
        "decoder_type": decoder_type_of(engine.info),
        "threads": threads, "cores": available_cores(), "frames": kazeia.pop("frames"), "runs": runs,
        "checkpoint": str(shared) if shared else f"Kazeia's own random model ({why_not_shared})",
        "kazeia": kazeia,
        "roofline": {"read_bandwidth_gbs": bandwidth, "bandwidth_probes_gbs": probes, "weight_bytes_per_frame": wbytes,
                     "talker_plus_code_predictor_roofline_ms": roofline_ms,
                     "talker_plus_code_predictor_ms": lm_ms, "ratio_to_roofline": lm_ms / roofline_ms},
    }
    _compare_peers(result, theirs, prepared, kazeia)
    _compare_reference(result, engine, size, frames, threads, reference)
    result["decoder_compute"] = decoder_compute(engine.decoder, decoder_type_of(engine.info),
                                                per_frame["decoder"])
    result["rtf_floor"] = rtf_floor(kazeia, result["frames"], engine.info.frame_rate, roofline_ms,
                                    result["decoder_compute"])
    # last: it converts and writes more files, which must not overlap any timing
    if divergence_types:
        ref_engine = Engine.load(model_for("f32", "f32"), threads=threads)
        result["divergence_vs_f32"] = {}
        for q in divergence_types:
            other = engine if q == out_type else Engine.load(model_for(q, decoder_type), threads=threads)
            result["divergence_vs_f32"][q] = divergence(ref_engine, other, frames=50)
    return result


def _shared_checkpoint(size: str, model_path: str | None, peers: bool, progress: bool) -> tuple:
    """(the Hugging Face checkpoint every engine runs, with a peer engine installed; or None, why not)."""
    if model_path:
        return None, "a model file was given"
    if not peers:
        return None, "peers were not asked for"
    if vox_python() is not None or onnxruntime_python() is not None:
        return shared_checkpoint(size, progress)
    return None, "no peer engine installed (peers/setup_vox.sh, setup_ort.sh)"


def _alternating_runs(engine: Engine, frames: int, threads: int, runs: int, peer_runs: dict, prepared: dict):
    """Kazeia's runs and each peer's, alternating: (ours, theirs, bandwidth probes, peak MB). The
    roofline's bandwidth is read around every run, not once afterwards: on a shared machine it moves
    by half within minutes, and the ratio should compare a run with its own moment."""
    request = Request(BENCH_TEXT, "vivian", "english", plan=ONE_PROMPT,
                      sampling=SamplingParams.from_model(engine.info, seed=1, max_frames=frames))
    ours, theirs = [], {name: [] for name in peer_runs}
    peak_mb, probes = peak_rss_mb(), []
    for _ in range(runs):
        probes.append(read_bandwidth_gbs(threads))
        reset_peak_rss()   # the probe's buffer is not the engine's memory
        stream = engine.open_take(request)
        for _ in stream:
            pass
        t = stream.result.timings
        per_frame = {"talker": t.mean_ms("talker"), "code_predictor": t.mean_ms("code_predictor"),
                     "decoder": t.mean_ms("decoder")}
        ours.append({"prefill_ms": t.prefill_ms, "ms_per_frame": per_frame,
                     "total_ms_per_frame": sum(per_frame.values()), "ttfa_ms": t.ttfa_ms, "rtf": t.rtf,
                     "frames": t.frames})
        peak_mb = max(peak_mb, peak_rss_mb())
        for name, run in peer_runs.items():
            if prepared[name].get("available"):
                theirs[name].append(run(frames))
    probes.append(read_bandwidth_gbs(threads))
    return ours, theirs, probes, peak_mb


def _compare_peers(result: dict, theirs: dict, prepared: dict, kazeia: dict) -> None:
    """Each peer's median run beside Kazeia's, and the best of them on the whole pipeline."""
    per_frame = kazeia["ms_per_frame"]
    for name in theirs:
        available = [r for r in theirs[name] if r.get("available")]
        peer = _median_run(available) if available else (theirs[name][0] if theirs[name] else prepared[name])
        if len(available) > 1:
            peer = {**peer, "runs_total_ms_per_frame": [r["total_ms_per_frame"] for r in available],
                    "runs_rtf": [r["rtf"] for r in available]}
        result[name] = peer
        if peer.get("available"):
            result[f"speedup_vs_{name}"] = peer["total_ms_per_frame"] / sum(per_frame.values())
        if peer.get("available") and peer.get("rtf"):   # (no RTF when a peer made no audio)
            result[f"rtf_speedup_vs_{name}"] = peer["rtf"] / kazeia["rtf"]
    ran = {name: result[name]["rtf"] for name in theirs if f"rtf_speedup_vs_{name}" in result}
    if ran:   # the whole pipeline, wall clock: what each engine makes a listener wait, all stages in
        best = min(ran, key=ran.get)
        result["best_peer"] = {"engine": best, "rtf": ran[best], "rtf_speedup": ran[best] / kazeia["rtf"]}


def _compare_reference(result: dict, engine: Engine, size: str, frames: int, threads: int, reference: bool) -> None:
    if reference and not same_size(engine.info, size):
        result["reference"] = {"available": False, "reason": f"the model is {engine.info.size_label}, the reference "
                                                              f"would run --size {size}: not compared"}
    elif reference:
        ref = reference_tts(engine.model, size, frames, threads)
        result["reference"] = ref
        if ref.get("available"):
            result["speedup_vs_reference"] = ref["total_ms_per_frame"] / sum(result["kazeia"]["ms_per_frame"].values())
