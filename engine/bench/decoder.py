"""`kazeia bench --stage decoder`: the speech decoder alone, offline and streamed frame by frame,
with its matrix-product GFLOP/s against the GEMM peak, ONNX Runtime's f32 decoder on the same
weights (time and SNR) and the reference's PyTorch decoder side by side."""
from __future__ import annotations

import time

import numpy as np

from ..model_files.model_file import open_model
from ..synthesis.speech_decoder import SpeechDecoder
from ..synthesis.threads import available_cores, default_threads
from .compute import decoder_compute
from ..accuracy import snr_db
from .models import converted, decoder_type_of, model_path_for, same_size, shared_checkpoint
from .peers import onnxruntime_decoder, run_reference_script

def bench_decoder(size: str = "0.6b", frames: int = 50, threads: int | None = None, decoder_type: str = "f32",
                  reference: bool = True, model_path: str | None = None, seed: int = 0,
                  progress: bool = True, peers: bool = True, runs: int = 1) -> dict:
    """Kazeia's decoder offline and streamed; with `peers` (and no --model) on the shared checkpoint
    beside ONNX Runtime's f32 decoder of the same weights and codes: Kazeia's offline runs before and
    after the peer's (one process, its export once), medians of each, and the SNR of Kazeia's audio
    against the peer's (the reference's f32 arithmetic)."""
    threads = threads or default_threads()
    runs = max(runs, 1)
    shared = peers and model_path is None
    if shared:
        folder, _ = shared_checkpoint(size, progress)
        path = converted(folder, "q8_0", decoder_type, progress)
    else:
        path = model_path_for(model_path, size, decoder_type, progress, "q8_0")
    model = open_model(path)
    codes = np.random.default_rng(seed).integers(0, 2048, size=(frames, 16), dtype=np.int32)
    dec = SpeechDecoder(model, threads=threads)
    dec.decode(codes[:4])   # warm-up: page in the weights

    def offline_runs(n):
        times = []
        for _ in range(n):
            start = time.perf_counter()
            wav = dec.decode(codes)
            times.append(time.perf_counter() - start)
        return times, wav

    offline, wav = offline_runs(max(runs, 2))
    stream = dec.session()
    per_frame = []
    for i in range(frames):
        start = time.perf_counter()
        stream.push(codes[i:i + 1])
        per_frame.append(time.perf_counter() - start)
    onnx, onnx_wav = {}, None
    if peers and not shared:
        onnx = {"available": False, "reason": "--model given: ONNX Runtime runs the shared checkpoint"}
    if shared:
        onnx, onnx_wav = onnxruntime_decoder(folder / "speech_tokenizer", codes, threads, runs)
        offline += offline_runs(max(runs, 2))[0]   # Kazeia again after the peer
    offline_ms = 1000 * float(np.median(offline)) / frames
    result = {
        "stage": "decoder", "model": str(path), "size": model.info.size_label, "decoder_type": decoder_type_of(model.info),
        "threads": threads, "cores": available_cores(), "frames": frames,
        "kazeia": {"offline_ms_per_frame": offline_ms, "offline_rtf": offline_ms / 80.0,
                   "offline_runs_ms_per_frame": [1000 * t / frames for t in offline],
                   "stream_ms_per_frame_mean": 1000 * float(np.mean(per_frame)),
                   "stream_ms_first_frame": 1000 * per_frame[0],
                   "stream_ms_per_frame_p90": 1000 * float(np.percentile(per_frame, 90))},
        "decoder_compute": decoder_compute(dec, decoder_type_of(model.info), offline_ms),
    }
    if onnx:
        result["onnxruntime"] = onnx
        if onnx_wav is not None:
            onnx["snr_db_of_kazeia"] = snr_db(onnx_wav, wav)
            result["speedup_vs_onnxruntime"] = onnx["ms_per_frame"] / offline_ms
    if reference and not same_size(model.info, size):
        result["reference"] = {"available": False, "reason": f"the model is {model.info.size_label}, the reference "
                                                              f"would run --size {size}: not compared"}
    elif reference:
        ref = run_reference_script("decoder_bench.py", frames, threads, seed)
        result["reference"] = ref
        if ref.get("available"):
            result["speedup_vs_reference"] = ref["ms_per_frame"] / offline_ms
    return result
