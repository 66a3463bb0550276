"""`kazeia bench --stage decoder`: the speech decoder alone, offline and streamed frame by frame,
with its matrix-product GFLOP/s against the GEMM peak, and the reference's decoder side by side."""
from __future__ import annotations

import time

import numpy as np

from ..model_file import open_model
from ..speech_decoder import SpeechDecoder
from ..threads import available_cores, default_threads
from .compute import decoder_compute
from .models import decoder_type_of, model_path_for, same_size
from .peers import run_reference_script

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
    stream = dec.session()
    per_frame = []
    for i in range(frames):
        start = time.perf_counter()
        stream.push(codes[i:i + 1])
        per_frame.append(time.perf_counter() - start)
    offline_ms = 1000 * min(offline) / frames
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


