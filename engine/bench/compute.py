"""How hard the speech decoder works: matrix-product GFLOP/s per decoder stage against the GEMM peak
ggml reaches on this machine for the decoder's weight type, and what the product the decoder runs
(Kazeia's bf16 GEMM where it applies) reaches at that shape (a report for `kazeia bench`; no target).

The decoder is compute-bound (unlike the talker and code predictor, which stream weights), so its
headroom is the distance to that peak. Stages are measured by launching the graph one node at a
time (the decoder's profile mode), so their times add up to more than one whole launch takes; the
whole-decoder figure uses the bench's own timing."""
from __future__ import annotations

import re

import numpy as np

from kazeia import _native_checks

from ..synthesis.speech_decoder import DecoderSession, SpeechDecoder

# A large product of the kind the vocoder's convolutions make (weights [out, in x taps], time columns).
PEAK_SHAPE = {"rows": 1024, "cols": 4096, "n": 256}
PROFILE_FRAMES = 8


def decoder_stage(key: str) -> str:
    """A profile key "<boundary the ops follow>/<op>" -> the decoder stage those ops belong to."""
    boundary = key.split("/")[0].removeprefix("after ")
    if boundary.startswith(("quantizer", "dec.vq.")):
        return "quantizer"
    if boundary.startswith(("pre_conv", "pre_transformer")):
        return "transformer"
    if boundary.startswith("upsample_"):
        return "upsampling"
    m = re.match(r"decoder_(\d+)_", boundary)
    if m and int(m.group(1)) < 4:
        return f"vocoder block {int(m.group(1)) + 1}"
    return "vocoder output"


def gemm_peak_gflops(weight_type: str, threads: int, kazeia: bool = False) -> float:
    """ggml's product at the peak shape, or (kazeia) the product the decoder itself runs on the CPU."""
    return _native_checks.gemm_gflops(weight_type, PEAK_SHAPE["rows"], PEAK_SHAPE["cols"], PEAK_SHAPE["n"], threads,
                               kazeia=kazeia)


def decoder_compute(decoder: SpeechDecoder, weight_type: str, ms_per_frame: float, seed: int = 0) -> dict:
    """Per-stage ms, GFLOP and GFLOP/s per frame, the whole decoder's GFLOP/s at `ms_per_frame`
    (what the bench timed), and both against the GEMM peak of `weight_type` on the same threads."""
    hp = decoder.model.info.hparams["decoder"]
    codes = np.random.default_rng(seed).integers(0, hp["codebook_size"], (PROFILE_FRAMES, hp["num_quantizers"]))
    stream = DecoderSession(decoder, profile=True)
    stream.push(codes)
    stages: dict[str, list[float]] = {}
    for key, (seconds, flops) in stream.profile().items():
        acc = stages.setdefault(decoder_stage(key), [0.0, 0.0])
        acc[0] += seconds / PROFILE_FRAMES
        acc[1] += flops / PROFILE_FRAMES
    peak = gemm_peak_gflops(weight_type, decoder.threads)
    order = ["quantizer", "transformer", "upsampling", *(f"vocoder block {i}" for i in range(1, 5)), "vocoder output"]
    stages = dict(sorted(stages.items(), key=lambda kv: order.index(kv[0])))
    per_stage = {name: {"ms_per_frame": 1000 * s, "gflop_per_frame": f / 1e9, "gflops": f / s / 1e9 if s else 0.0,
                        "of_peak": f / s / 1e9 / peak if s else 0.0}
                 for name, (s, f) in stages.items()}
    gflop = sum(f for _, f in stages.values()) / 1e9
    whole = gflop / (ms_per_frame / 1000)
    return {"gemm_peak_gflops": peak, "gemm_peak_shape": {**PEAK_SHAPE, "type": weight_type},
            "kernel_peak_gflops": gemm_peak_gflops(weight_type, decoder.threads, kazeia=True),
            "threads": decoder.threads, "gflop_per_frame": gflop, "gflops": whole, "of_peak": whole / peak,
            "per_stage": per_stage,
            "note": "stages timed one node at a time (profile mode); the whole-decoder figure uses the bench's timing"}
