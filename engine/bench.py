"""`kazeia bench`: speed on full-size random weights, with the PyTorch reference side by side
when its interpreter is available. Results are JSON; ratios are measured in the same run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .demo import cache_dir
from .gguf_file import TypeMix
from .model_file import open_model
from .random_model import make_random_model
from .speech_decoder import SpeechDecoder
from .threads import available_cores, default_threads

REFERENCE_SCRIPTS = Path(__file__).parent / "reference"


def _interpreter(env_var: str, venv: str) -> Path | None:
    """$env_var, else <venv>/bin/python in the project folder (the one holding this interpreter's
    .venv), beside the source tree, or in the working folder."""
    env = os.environ.get(env_var)
    candidates = [Path(env)] if env else [Path(sys.prefix).parent / venv / "bin" / "python",
                                          Path(__file__).resolve().parents[1] / venv / "bin" / "python",
                                          Path.cwd() / venv / "bin" / "python"]
    return next((p for p in candidates if p.exists()), None)


def reference_python() -> Path | None:
    """The reference's interpreter: $KAZEIA_REF_PYTHON, else .venv-ref (tests/reference/setup_venv.sh)."""
    return _interpreter("KAZEIA_REF_PYTHON", ".venv-ref")


def vox_python() -> Path | None:
    """An interpreter with vox-tts: $KAZEIA_VOX_PYTHON, else .venv-vox (tests/reference/setup_vox.sh)."""
    return _interpreter("KAZEIA_VOX_PYTHON", ".venv-vox")


def bench_model(size: str, decoder_type: str, progress: bool, out_type: str = "q8_0") -> Path:
    """A cached random model of `size`; the same seed gives the same values in every type."""
    mix = TypeMix.parse(out_type, fallback="q8_0")
    path = cache_dir() / f"bench-{size}-custom_voice-{mix.slug}-dec{decoder_type}-seed0.gguf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        if progress:
            print(f"making the {size} {out_type} random model once: {path} (0.6B: 0.8-4 GB, 1.7B: 2-8 GB; "
                  "minutes)", file=sys.stderr)
        make_random_model(path, size=size, variant="custom_voice", seed=0, out_type=mix,
                          decoder_type=decoder_type, progress=progress)
        if progress:
            print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB)", file=sys.stderr)
    return path


def model_path_for(model: str | None, size: str, decoder_type: str, progress: bool, out_type: str) -> Path:
    """--model (a file, or "demo"), else the cached random model of --size."""
    if model:
        from .demo import resolve_model
        return resolve_model(model)
    return bench_model(size, decoder_type, progress, out_type=out_type)


def decoder_type_of(info) -> str:
    """The type the speech decoder's matrices are stored in (what ran, not what was asked for)."""
    return info.stage_type("decoder")


def same_size(info, size: str) -> bool:
    """Whether a model has the dimensions of the random models of `size` (what the reference and peers
    are built at): comparing across sizes made a tiny model look 151x faster than a 0.6B reference."""
    from .random_model import _TALKER
    return info.hparams["talker"]["hidden_size"] == _TALKER[size][0] and \
        info.hparams["talker"]["num_layers"] == _TALKER[size][2]


def run_reference_script(script: str, *args) -> dict:
    return run_script(reference_python(), "no reference interpreter (set KAZEIA_REF_PYTHON or run "
                                           "tests/reference/setup_venv.sh)", REFERENCE_SCRIPTS / script, *args)


def run_script(py: Path | None, missing: str, script: Path, *args) -> dict:
    """Runs a script under another interpreter; its last stdout line is a JSON object."""
    if py is None:
        return {"available": False, "reason": missing}
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run([str(py), str(script), *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=3600)
    if r.returncode != 0:
        return {"available": False, "reason": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    return {"available": True, **json.loads(r.stdout.strip().splitlines()[-1])}


def bench_decoder(size: str = "0.6b", frames: int = 50, threads: int | None = None, decoder_type: str = "f32",
                  reference: bool = True, model_path: str | None = None, seed: int = 0,
                  progress: bool = True) -> dict:
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, "q8_0")
    model = open_model(path)
    codes = np.random.default_rng(seed).integers(0, 2048, size=(frames, 16), dtype=np.int32)
    dec = SpeechDecoder(model, threads=threads)
    dec.decode(codes[:4])   # warm-up: page in the weights
    offline = []
    for _ in range(2):
        start = time.perf_counter()
        dec.decode(codes)
        offline.append(time.perf_counter() - start)
    stream = dec.stream()
    per_frame = []
    for i in range(frames):
        start = time.perf_counter()
        stream.push(codes[i:i + 1])
        per_frame.append(time.perf_counter() - start)
    offline_ms = 1000 * min(offline) / frames
    from .bench_compute import decoder_compute
    result = {
        "stage": "decoder", "model": str(path), "size": model.info.size_label, "decoder_type": decoder_type_of(model.info),
        "threads": threads, "cores": available_cores(), "frames": frames,
        "kazeia": {"offline_ms_per_frame": offline_ms, "offline_rtf": offline_ms / 80.0,
                   "stream_ms_per_frame_mean": 1000 * float(np.mean(per_frame)),
                   "stream_ms_first_frame": 1000 * per_frame[0],
                   "stream_ms_per_frame_p90": 1000 * float(np.percentile(per_frame, 90))},
        "decoder_compute": decoder_compute(dec, decoder_type_of(model.info), offline_ms),
    }
    if reference and not same_size(model.info, size):
        result["reference"] = {"available": False, "reason": f"the model is {model.info.size_label}, the reference "
                                                              f"would run --size {size}: not compared"}
    elif reference:
        ref = run_reference_script("decoder_bench.py", frames, threads, seed)
        result["reference"] = ref
        if ref.get("available"):
            result["speedup_vs_reference"] = ref["ms_per_frame"] / offline_ms
    return result


def main_bench(args) -> int:
    if args.batch is not None:
        from .bench_batch import bench_batch
        result = bench_batch(tuple(args.batch), size=args.size, out_type=args.type,
                             decoder_type=args.decoder_type or "f16", frames=args.frames, threads=args.threads,
                             runs=args.runs, model_path=args.model, progress=not args.quiet)
    elif args.contend is not None:
        from .bench_contend import bench_contend
        result = bench_contend(args.contend, size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                               frames=args.frames, runs=args.runs, threads=args.threads, model_path=args.model,
                               progress=not args.quiet)
    elif args.placements is not None:
        from .bench_placement import bench_placements
        result = bench_placements(tuple(args.placements) or ("cpu", "accel-weights", "accel-sched"), size=args.size,
                                  out_type=args.type, decoder_type=args.decoder_type or "f16", frames=args.frames,
                                  threads=args.threads, progress=not args.quiet)
    elif args.stage == "decoder":
        result = bench_decoder(size=args.size, frames=args.frames, threads=args.threads,
                               decoder_type=args.decoder_type or "f32", reference=not args.no_reference,
                               model_path=args.model, progress=not args.quiet)
    else:
        from .bench_tts import bench_tts
        result = bench_tts(size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                           frames=args.frames, threads=args.threads, reference=not args.no_reference,
                           divergence_types=tuple(args.divergence or ()), model_path=args.model,
                           progress=not args.quiet, peers=not args.no_peers, runs=args.runs)
    from .bench_report import summary
    text = json.dumps(result, indent=2)
    if args.json == "-":
        print(text)
    else:
        print(summary(result))
        if args.json:
            Path(args.json).write_text(text + "\n")
    return 0
