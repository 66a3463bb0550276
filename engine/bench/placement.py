"""`kazeia bench --placements ...`: every placement stage by stage on full-size random weights:
per-stage ms per frame, TTFA and RTF at the bench's type, where each launch ran (splits, ops per
device, bytes copied, CPU fallbacks), and its accuracy against f32 on the CPU: the f32 model run
under that placement, teacher-forced on the CPU's greedy frames (talker and code-predictor logit KL,
top-5, vox's gate) and its decoder on the same codes (SNR). On a software GPU (lavapipe) the
timings only say that it ran: accuracy is what counts there."""
from __future__ import annotations

from ..accuracy import GATE_KL, GATE_SNR_DB, GATE_TOP5, decoder_snr_db, logit_divergence, stage_gates
from ..synthesis.placement import MODES, mode_status, silent_cpu_stages, stage_lines
from ..synthesis.requests import ONE_PROMPT, Request, SamplingParams
from ..synthesis.engine import Engine
from ..synthesis.threads import default_threads
from .models import bench_model
from .text import BENCH_TEXT

def passes_gate(d: dict) -> bool:
    return all(stage_gates(d).values()) and d["decoder_snr_db"] >= GATE_SNR_DB


def bench_placements(placements: tuple[str, ...] = MODES, size: str = "0.6b", out_type: str = "q8_0",
                     decoder_type: str = "f16", frames: int = 40, accuracy_frames: int = 16,
                     threads: int | None = None, progress: bool = True) -> dict:
    threads = threads or default_threads()
    status = mode_status()
    path = bench_model(size, decoder_type, progress, out_type=out_type)
    f32_path = bench_model(size, "f32", progress, out_type="f32")
    engine = Engine.load(path, threads=threads)
    ref = Engine.load(f32_path, threads=threads)   # f32 on the CPU: the numbers every placement is held to
    placed = Engine(ref.model, threads=threads)    # the same file under each placement
    speaker = dict(speaker="vivian", language="english")
    greedy = ref.take(Request(BENCH_TEXT, **speaker, plan=ONE_PROMPT,
                              sampling=SamplingParams.from_model(ref.info, max_frames=accuracy_frames).greedy()))
    sampling = SamplingParams.from_model(engine.info, seed=1, max_frames=frames)
    out = {"stage": "placements", "model": str(path), "size": size, "type": out_type, "decoder_type": decoder_type,
           "threads": threads, "frames": frames, "accuracy_frames": len(greedy.codes),
           "gate": {"kl": GATE_KL, "ref_argmax_in_top5": GATE_TOP5, "decoder_snr_db": GATE_SNR_DB}, "placements": {}}
    for mode in placements:
        if not status[mode].available:
            out["placements"][mode] = {"available": False, "reason": status[mode].reason}
            continue
        engine.set_placement(mode)
        engine.warm_up()
        stream = engine.open_take(Request(BENCH_TEXT, **speaker, sampling=sampling, plan=ONE_PROMPT))
        for _ in stream:
            pass
        t = stream.result.timings
        reports = stream.result.placement_report
        placed.set_placement(mode)
        accuracy = {**logit_divergence(ref, placed, BENCH_TEXT, speaker, greedy.codes),
                    "decoder_snr_db": decoder_snr_db(ref, placed, greedy.codes)}
        out["placements"][mode] = {
            "available": True, "what": status[mode].reason,
            "ms_per_frame": {s: t.mean_ms(s) for s in ("talker", "code_predictor", "decoder")},
            "prefill_ms": t.prefill_ms, "ttfa_ms": t.ttfa_ms, "rtf": t.rtf,
            "where": stage_lines(reports), "launches": reports, "cpu_fallbacks": silent_cpu_stages(reports),
            "accuracy_vs_f32_cpu": accuracy, "passes_gate": passes_gate(accuracy)}
    return out
