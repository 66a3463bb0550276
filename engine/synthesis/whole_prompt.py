"""One prompt's whole take, for a caller that waits for all of it (Engine.take): every frame
generated, then decoded as the reference decodes (in-context cloning cut by the reference's own
rounding); with the decoder beside generation, a stream's chunks joined, cut the same way (a stream
equals offline decoding bit for bit)."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from .prompt_stream import build_prompt, icl_codes, open_prompt
from .requests import Request, Result, Timings

if TYPE_CHECKING:
    from .host import TakeHost

OFFLINE_DECODE_EVERY = 8   # overlapped: a decoder graph's most frames (no one listens meanwhile)


def whole_prompt(host: "TakeHost", request: Request) -> Result:
    """`request` (its sampling given) as one prompt, all of it."""
    if host.overlap_worker is not None:
        return _overlapped(host, request)
    with host.lock:
        start = time.perf_counter()
        plan = build_prompt(host, request)
        timings = Timings(tokenize_ms=1000 * (time.perf_counter() - start), frame_seconds=1 / host.info.frame_rate)
        policy = host.thread_policy
        policy.restart()
        out = host.generate_frames(plan, request.sampling,
                                   lambda index, codes, talker_ms, cp_ms, prefill_ms:
                                   policy.observe(talker_ms + cp_ms) or True)
        codes = out["codes"]
        t_dec = time.perf_counter()
        audio = _decode(host, codes, icl_codes(request.voice))
        dec_ms = 1000 * (time.perf_counter() - t_dec)
        _fill(timings, out, [dec_ms / max(len(codes), 1)] * len(codes), start)
        timings.ttfa_ms = timings.total_ms
        return Result(audio, host.info.sample_rate, codes, timings, out["stop_reason"], host.report_held())


def _overlapped(host: "TakeHost", request: Request) -> Result:
    stream = open_prompt(host, request, None, OFFLINE_DECODE_EVERY)
    stream.join()
    if stream.error is not None:
        raise stream.error
    result = stream.result
    ref = icl_codes(request.voice)
    if ref is not None and stream.prime_audio is not None:
        full = np.concatenate([stream.prime_audio, result.audio])
        result.audio = full[int(len(ref) / max(len(ref) + len(result.codes), 1) * len(full)):]
    result.timings.ttfa_ms = result.timings.total_ms   # (offline: the audio comes all at once)
    return result


def _decode(host: "TakeHost", codes: np.ndarray, ref: np.ndarray | None) -> np.ndarray:
    """In-context cloning decodes the reference codes first and cuts their share of the
    waveform, with the reference's own rounding (int(ref / total * samples))."""
    if ref is None:
        return host.decoder.decode(codes) if len(codes) else np.zeros(0, np.float32)
    full = host.decoder.decode(np.concatenate([ref, codes]))
    cut = int(len(ref) / max(len(ref) + len(codes), 1) * len(full))
    return full[cut:]


def _fill(timings: Timings, out: dict, decoder_ms: list[float], start: float) -> None:
    timings.prefill_ms = float(out["prefill_ms"])
    t = out["timings_ms"]
    timings.talker_ms = [float(x) for x in t[:, 0]]
    timings.code_predictor_ms = [float(x) for x in t[:, 1]]
    timings.decoder_ms = decoder_ms
    timings.frames = len(out["codes"])
    timings.total_ms = 1000 * (time.perf_counter() - start)
