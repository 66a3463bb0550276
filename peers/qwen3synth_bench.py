"""Times qwen3synth (PyPI `qwen3synth`, a peer engine: Qwen3-TTS on ONNX Runtime through onnxvoice) on a
Hugging Face Qwen3-TTS checkpoint for a forced number of frames: per-stage ms per frame from the time
spent in each of its ONNX Runtime sessions, prefill, time to audio, RTF and peak RSS.

Run by the ONNX Runtime venv's interpreter (peers/setup_ort.sh):
    python qwen3synth_bench.py HF_DIR CACHE_DIR QUALITY FRAMES THREADS TEXT LANGUAGE
The checkpoint is exported once into a bundle in CACHE_DIR (qwen3synth_export.py); FRAMES 0 only
exports (so that no export runs while another engine is being timed). qwen3synth speaks VoiceDesign
and Base bundles: the bench's CustomVoice weights run as a VoiceDesign bundle with a one-line voice
description, the same per-frame work. Its generation stops on the end-of-speech code, which random
weights sample at any time: the bench masks that code (as vox's VOX_DEBUG_NO_EOS does) and
max_new_tokens caps the count.
Prints one JSON line. Imports nothing from Kazeia.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "engine"))   # proc_stats (standard library only)
from proc_stats import machine_busy_seconds, peak_rss_mb  # noqa: E402

DESCRIPTION = "A clear, even voice."
STAGES = {"talker_prefill": "prefill", "talker_decode": "talker", "code_predictor": "code_predictor",
          "vocoder": "decoder"}


def bundle_for(hf_dir: Path, cache: Path, quality: str) -> Path:
    """The exported bundle of the checkpoint, made again when the checkpoint or the exporter is newer."""
    out = cache / f"{hf_dir.resolve().name}-{quality}"
    exporter = Path(__file__).with_name("qwen3synth_export.py")
    newest = max(f.stat().st_mtime for f in [exporter, *hf_dir.rglob("*")] if f.is_file())
    if not (out / "config.json").exists() or (out / "config.json").stat().st_mtime < newest:
        from qwen3synth_export import build_bundle   # same folder
        cache.mkdir(parents=True, exist_ok=True)
        build_bundle(hf_dir, out, quality)
    return out


def open_runtime(bundle: Path, quality: str, threads: int, never_stop: bool = True):
    """qwen3synth's runtime on the bundle, its ONNX Runtime sessions on `threads` threads (its own
    default would take every core), and the end-of-speech code masked if `never_stop`."""
    import numpy as np
    import onnxruntime as ort
    from onnxvoice.systems import qwen3_generation
    from qwen3synth import Qwen3Runtime

    mask = qwen3_generation.mask_talker_logits

    def without_eos(logits, *, eos_token_id, **kw):
        scores = mask(logits, eos_token_id=eos_token_id, **kw)
        scores[eos_token_id] = -np.inf
        return scores

    if never_stop:
        qwen3_generation.mask_talker_logits = without_eos
    runtime = Qwen3Runtime.load(bundle, quality=quality, provider="cpu")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    runtime.adapter.session_options = options   # read when the sessions are made, on the first request
    return runtime


def synthesize(runtime, text: str, language: str, frames: int, description: str = DESCRIPTION, **generation):
    from qwen3synth import GenerationConfig, VoiceDesignRequest
    request = VoiceDesignRequest(id="bench", text=text, description=description, language=language)
    return runtime.design_voice(request, config=GenerationConfig(max_new_tokens=frames, **generation))


def time_sessions(runtime) -> dict:
    """Wraps each ONNX Runtime session's run with a clock; returns the seconds per stage (live)."""
    seconds = {stage: 0.0 for stage in STAGES.values()}
    for component, session in runtime.adapter._sessions.items():
        def timed(inputs, run=session.run, stage=STAGES[component]):
            start = time.perf_counter()
            try:
                return run(inputs)
            finally:
                seconds[stage] += time.perf_counter() - start
        session.run = timed
    return seconds


def bench(hf_dir, cache, quality, frames, threads, text, language) -> dict:
    try:
        import onnxruntime as ort
        import qwen3synth
    except Exception as e:  # noqa: BLE001
        return {"available": False, "reason": f"cannot import qwen3synth: {e} (peers/setup_ort.sh installs it)"}
    version = f"qwen3synth {qwen3synth.__version__}, ONNX Runtime {ort.__version__}"
    bundle = bundle_for(Path(hf_dir), Path(cache), quality)
    if frames == 0:
        return {"version": version, "bundle": str(bundle)}
    runtime = open_runtime(bundle, quality, threads)
    synthesize(runtime, text, language, frames, seed=1)   # warm-up: makes the sessions
    seconds = time_sessions(runtime)
    cpu0, busy0, t0 = os.times(), machine_busy_seconds(), time.perf_counter()
    result = synthesize(runtime, text, language, frames, seed=1)
    wall = time.perf_counter() - t0
    cpu1, busy1 = os.times(), machine_busy_seconds()
    ours = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    n = int(result.metadata["frames_generated"])
    ms = {stage: 1000 * seconds[stage] / n for stage in ("talker", "code_predictor", "decoder")}
    audio_s = result.duration_seconds
    return {"available": True, "engine": "qwen3synth", "version": version,
            "weights": f"{quality} LM (ONNX Runtime MatMulNBits)" if quality == "int4" else "fp32",
            "bundle": str(bundle), "frames": n, "threads": threads, "ms_per_frame": ms,
            "total_ms_per_frame": sum(ms.values()), "prefill_ms": 1000 * seconds["prefill"],
            # outside the sessions: embedding sums, sampling, checks (numpy)
            "other_ms_per_frame": (1000 * wall - 1000 * sum(seconds.values())) / n,
            "streaming": False, "ttfa_ms": 1000 * wall,   # its audio arrives whole, at the end
            "rtf": wall / audio_s if audio_s else None, "peak_rss_mb": peak_rss_mb(),
            "others_cpu_cores": None if busy0 is None or busy1 is None else max(0.0, busy1 - busy0 - ours) / wall}


def main():
    hf_dir, cache, quality, frames, threads, text, language = sys.argv[1:8]
    try:
        return bench(hf_dir, cache, quality, int(frames), int(threads), text, language)
    except Exception as e:  # noqa: BLE001
        return {"available": False, "reason": f"{type(e).__name__}: {e}"}


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
