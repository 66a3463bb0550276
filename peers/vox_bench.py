"""Times vox-tts (PyPI `vox-tts`, a peer engine) on a Hugging Face Qwen3-TTS checkpoint for a forced
number of frames: per-stage ms per frame from vox's own counters, TTFA, RTF and peak RSS.

Run by an interpreter that has vox installed (KAZEIA_VOX_PYTHON or .venv-vox):
    python vox_bench.py HF_DIR CACHE_DIR FRAMES THREADS TEXT SPEAKER LANGUAGE
vox converts HF_DIR once (`python -m vox build --dtype bf16 --quant q8`, cached in CACHE_DIR);
FRAMES 0 only converts (so that no conversion runs while another engine is being timed).
VOX_DEBUG_NO_EOS (read by vox's engine) keeps a random-weight model from stopping early, and
max_frames caps the count. Prints one JSON line. Imports nothing from Kazeia.
"""
import os

os.environ.setdefault("VOX_DEBUG_NO_EOS", "1")   # read once, when the native engine starts

import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1] / "engine"))   # proc_stats (standard library only)
from proc_stats import machine_busy_seconds, peak_rss_mb  # noqa: E402

SAMPLES_PER_FRAME = 1920   # the 12 Hz codec: 24 kHz / 12.5 frames a second


def built_model(hf_dir: Path, cache: Path, version: str) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"{hf_dir.resolve().name}.vox{version}.bf16.q8.tmod"
    newest = max(f.stat().st_mtime for f in hf_dir.rglob("*") if f.is_file())
    if out.exists() and out.stat().st_mtime >= newest:
        return out
    partial = out.with_suffix(".partial")
    r = subprocess.run([sys.executable, "-m", "vox", "build", "--model", str(hf_dir), "--dtype", "bf16", "--quant", "q8",
                        "-o", str(partial)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"vox build failed: {r.stdout.strip()[-800:]}")
    os.replace(partial, out)
    return out


def run_once(engine, voice, text, frames, language):
    """One streaming synthesis pulled a frame (SAMPLES_PER_FRAME samples) at a time."""
    before = engine.stats()["backend"]
    cpu0, busy0, t0 = os.times(), machine_busy_seconds(), time.perf_counter()
    session = engine.session(voice, chunk_samples=SAMPLES_PER_FRAME, language=language, max_frames=frames, seed=1)
    session.feed(text)
    first, samples = None, 0
    for chunk in session:
        if first is None:
            first = time.perf_counter() - t0
        samples += len(chunk)
    wall = time.perf_counter() - t0
    cpu1, busy1 = os.times(), machine_busy_seconds()
    del session   # vox adds a session's stage times to Engine.stats() when it is released
    after = engine.stats()["backend"]
    ours = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    others = None if busy0 is None or busy1 is None else max(0.0, busy1 - busy0 - ours) / wall
    seconds = {k: after["seconds"][k] - before["seconds"].get(k, 0.0) for k in after["seconds"]}
    return {"wall_s": wall, "ttfa_s": first, "samples": samples, "frames": after["frames"] - before["frames"],
            "seconds": seconds, "others_cpu_cores": others}


def main():
    hf_dir, cache, frames, threads, text, speaker, language = sys.argv[1:8]
    frames, threads = int(frames), int(threads)
    try:
        import vox
    except Exception as e:  # noqa: BLE001
        return {"available": False, "reason": f"cannot import vox: {e}"}
    try:
        model = built_model(Path(hf_dir), Path(cache), vox.__version__)
        if frames == 0:
            return {"version": vox.__version__, "model": str(model)}
        engine = vox.Engine(str(model), device="cpu", threads=threads)
        voice = engine.speaker_voice(speaker)
        run_once(engine, voice, text, frames, language)   # warm-up
        r = run_once(engine, voice, text, frames, language)
    except Exception as e:  # noqa: BLE001
        return {"available": False, "version": vox.__version__, "reason": f"{type(e).__name__}: {e}"}
    n = max(r["frames"], 1)
    ms = {"talker": 1000 * r["seconds"]["talker"] / n, "code_predictor": 1000 * r["seconds"]["predictor"] / n,
          "decoder": 1000 * r["seconds"]["codec"] / n}
    audio_s = r["samples"] / engine.sample_rate
    return {"available": True, "engine": "vox-tts", "version": vox.__version__, "weights": "q8 (codec bf16)",
            "model": str(model), "frames": r["frames"], "threads": threads, "ms_per_frame": ms,
            "total_ms_per_frame": sum(ms.values()), "prefill_ms": 1000 * r["seconds"].get("prefill", 0.0),
            "ttfa_ms": 1000 * r["ttfa_s"], "rtf": r["wall_s"] / audio_s if audio_s else None,
            "peak_rss_mb": peak_rss_mb(),
            "others_cpu_cores": r["others_cpu_cores"]}


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
