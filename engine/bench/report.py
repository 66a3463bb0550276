"""The short table `kazeia bench` prints on the terminal (the whole result goes to --json)."""
from __future__ import annotations

STAGES = ("talker", "code_predictor", "decoder")


def _ms(d: dict) -> str:
    return " / ".join(f"{d[s]:.1f}" for s in STAGES)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()   # noqa: E731
    return [line(header), line(["-" * w for w in widths]), *map(line, rows)]


def _compared(name: str, d: dict | None, ours_ms: float, key: str) -> str:
    if not d:
        return ""
    if not d.get("available"):
        return f"{name}: not run ({d.get('reason', '?')})"
    return f"{name}: {d[key]:.1f} ms per frame; Kazeia {d[key] / ours_ms:.2f}x faster"


def _decoder_compute(d: dict | None) -> list[str]:
    if not d:
        return []
    stages = ", ".join(f"{name} {s['gflops']:.0f}" for name, s in d["per_stage"].items() if s["gflop_per_frame"] > 0)
    return [f"decoder: {d['gflop_per_frame']:.2f} GFLOP per frame at {d['gflops']:.0f} GFLOP/s, "
            f"{d['of_peak']:.0%} of ggml's {d['gemm_peak_shape']['type']} GEMM peak here "
            f"({d['gemm_peak_gflops']:.0f} GFLOP/s; the decoder's own product: {d['kernel_peak_gflops']:.0f}); "
            f"per stage, node by node: {stages}"]


def _cpu_levels(result: dict, lines: list[str]) -> None:
    lines[0] += f", {result['type']} with a {result['decoder_type']} decoder, {result['frames']} frames"
    rows = []
    for name, d in result["levels"].items():
        v = d["vs_default"]
        rows.append([f"KAZEIA_CPU={name} ({d['cpu_level']})", _ms(d["ms_per_frame"]), f"{d['total_ms_per_frame']:.1f}",
                     f"{d['prefill_ms']:.0f}", f"{d['rtf']:.2f}", f"{d['ratio_to_roofline']:.2f}x",
                     " / ".join(f"{v[s]:.2f}" for s in STAGES) + f"; RTF {v['rtf']:.2f}"])
    lines += _table(["level", "talker / cp / decoder ms", "total ms", "prefill ms", "RTF", "vs roofline",
                     "vs default (stages; RTF)"], rows)
    lines.append(f"medians of {result['runs']} alternating run(s) per level, one process each")


def _long(result: dict, lines: list[str]) -> None:
    lines[0] += f", {result['type']}; {result['characters']} characters in {result['chunks']} chunks, " \
                f"{result['frames']} frames ({result['audio_s']:.1f} s of audio)"
    rows = [[name.replace("_", " "), f"{d['wall_s']:.2f}", f"{d['rtf']:.2f}", f"{d['ttfa_ms']:.0f}"]
            for name, d in (("one_at_a_time", result["one_at_a_time"]),
                            (f"batch of {result['batch']}", result["batched"]))]
    lines += _table(["chunks", "wall s", "RTF", "TTFA ms"], rows)
    lines.append(f"batched {result['batched_speedup']:.2f}x faster than one chunk at a time; TTFA "
                 f"{result['ttfa_vs_one_sentence']:.2f}x that of the first sentence alone "
                 f"({result['one_sentence_ttfa_ms']:.0f} ms); medians of {result['runs']} alternating round(s)")


def _book(result: dict, lines: list[str]) -> None:
    lines[0] += f", {result['type']}; batch {result['batch']}, chunks capped at {result['frames_cap']} frames"
    if "memory" in result:
        m = result["memory"]
        rows = [[b["chapters"], f"{b['audio_s'] / 60:.1f}", f"{b['peak_rss_mb']:.0f}", f"{b['wall_s']:.0f}"]
                for b in m["books"]]
        lines += _table(["chapters", "audio min", "peak RSS MB", "wall s"], rows)
        lines.append(f"memory per hour of audio: {m['mb_per_audio_hour']:+.1f} MB (the samples themselves: "
                     f"{m['pcm_mb_per_audio_hour']:.0f} MB an hour)")
    if "chapter" in result:
        c = result["chapter"]
        lines.append(f"one chapter ({c['chunks']} chunks, {c['audio_s']:.0f} s of audio): batched "
                     f"{c['batched_s']:.1f} s, one chunk at a time {c['one_at_a_time_s']:.1f} s: "
                     f"{c['batched_speedup']:.2f}x; medians of {result['runs']} alternating round(s)")
    if "resume" in result:
        r = result["resume"]
        lines.append(f"kill -9 after {r['killed_after_s']:.1f} s: {r['kept']} of {r['chunks']} chunks kept, "
                     f"{r['made_again']} made by the next run; lost: at most the {r['in_flight_at_most']} in "
                     f"flight ({r['audio_lost_at_most_s']:.1f} s of audio)")


def _agent(result: dict, lines: list[str]) -> None:
    lines[0] += f", {result['type']}; an answer of {result['answer_tokens']} tokens, {result['frames']} frames"
    rows = [[f"{d['rate_tokens_per_s']:g}" if d["rate_tokens_per_s"] else "burst", d["sockets"],
             d["mode"] + (f", hold {d['hold_ms']:g} ms" if d.get("hold_ms") else ""),
             f"{d['ttfa_p50_s'] * 1000:.0f}", f"{d['ttfa_p95_s'] * 1000:.0f}",
             f"{d['stalls_per_socket']} / {d['stall_ms_per_socket']:.0f}", f"{d['audio_s_per_wall_s']:.2f}"]
            for d in result["cases"]]
    lines += _table(["tokens/s", "sockets", "spoken", "first audio p50 ms", "p95 ms", "stalls / ms", "audio s per s"],
                    rows)
    w = result["waiting"]
    lines.append(f"one stream {w['ms_per_frame_alone']:.1f} ms per frame alone, "
                 f"{w['ms_per_frame_beside_waiting']:.1f} beside {w['waiting_streams']} waiting live turns "
                 f"({w['ratio']:.2f}x); {result['runs']} round(s), first audio from the first word sent")


def _serve(result: dict, lines: list[str]) -> None:
    lines[0] += f", {result['type']}; {result['frames']} frames per request, streamed as pcm"
    rows = [[feed, n, f"{d['ttfa_p50_s'] * 1000:.0f}", f"{d['ttfa_p95_s'] * 1000:.0f}", f"{d['throughput']:.2f}",
             f"{d['vs_one_client']:.2f}x", f"{d['rtf']:.2f}", f"{d['lost']}/{d['requests']}"]
            for feed, key in (("text fed", "clients"), ("whole text", "whole_text_clients"))
            for n, d in result.get(key, {}).items()]
    lines += _table(["prompt", "clients", "TTFA p50 ms", "TTFA p95 ms", "audio s per s", "vs 1 client", "RTF",
                     "lost"], rows)
    lines.append(f"medians of {result['runs']} alternating round(s); TTFA percentiles over every request")


def _all(result: dict, lines: list[str]) -> None:
    k = result["kazeia"]
    lines[0] += f", {result['type']} with a {result['decoder_type']} decoder, {result['frames']} frames"
    lines += _table(["engine", "talker / cp / decoder ms", "total ms", "TTFA ms", "RTF", "peak MB"],
                    [["Kazeia", _ms(k["ms_per_frame"]), f"{k['total_ms_per_frame']:.1f}", f"{k['ttfa_ms']:.0f}",
                      f"{k['rtf']:.2f}", f"{k['peak_rss_mb']:.0f}"]])
    if k.get("runs_ttfa_ms"):
        spread = lambda v, f: f"{f(min(v))}-{f(max(v))}"   # noqa: E731
        lines.append(f"{len(k['runs_ttfa_ms'])} runs (the median one above): total "
                     f"{spread(k['runs_total_ms_per_frame'], lambda x: f'{x:.1f}')} ms per frame, TTFA "
                     f"{spread(k['runs_ttfa_ms'], lambda x: f'{x:.0f}')} ms, "
                     f"RTF {spread(k['runs_rtf'], lambda x: f'{x:.2f}')}")
    r = result["roofline"]
    probes = r.get("bandwidth_probes_gbs") or [r["read_bandwidth_gbs"][str(result["threads"])]]
    lines.append(f"talker + code predictor at {r['ratio_to_roofline']:.2f}x the memory-bandwidth roofline "
                 f"(read bandwidth {min(probes):.0f}-{max(probes):.0f} GB/s around the runs)")
    f = result.get("rtf_floor")
    if f:
        lines.append(f"RTF floor of this moment {f['rtf']:.2f} (talker + code predictor at the roofline "
                     f"{f['talker_plus_code_predictor_roofline_ms']:.1f} ms, decoder at the GEMM peak "
                     f"{f['decoder_at_gemm_peak_ms']:.1f} ms, prefill as run): the run is at {f['ratio']:.2f}x it")
    for key in ("vox", "qwen3synth", "reference"):
        text = _compared(key, result.get(key), k["total_ms_per_frame"], "total_ms_per_frame")
        if f"rtf_speedup_vs_{key}" in result:   # (a peer's wall-clock RTF; the reference's is its stages' sum)
            text += f"; RTF {result[key]['rtf']:.2f} against {k['rtf']:.2f}"
        if text:
            lines.append(text)
    best = result.get("best_peer")
    if best:
        lines.append(f"whole pipeline (RTF, wall clock): Kazeia {best['rtf_speedup']:.2f}x faster than the best "
                     f"peer measured, {best['engine']}")
    lines += _decoder_compute(result.get("decoder_compute"))
    for q, d in result.get("divergence_vs_f32", {}).items():
        gates = d.get("passes_gate", {})
        lines.append(f"{q} vs f32: " + ", ".join(
            f"{s.replace('_', ' ')} ({d['types'][s]}) KL {d[f'{s}_kl']:.4f}, top 5 {d[f'{s}_ref_argmax_in_top5']:.1%} "
            f"{'passes' if gates.get(s) else 'FAILS'}" for s in ("talker", "code_predictor")))


def _decoder(result: dict, lines: list[str]) -> None:
    k = result["kazeia"]
    lines += _table(["engine", "offline ms/frame", "stream ms/frame", "first frame ms"],
                    [["Kazeia", f"{k['offline_ms_per_frame']:.1f}", f"{k['stream_ms_per_frame_mean']:.1f}",
                      f"{k['stream_ms_first_frame']:.1f}"]])
    lines += _decoder_compute(result.get("decoder_compute"))
    onnx = result.get("onnxruntime")
    for name, d in (("ONNX Runtime f32, same weights", onnx), ("reference (PyTorch, its own random weights)",
                                                               result.get("reference"))):
        text = _compared(name, d, k["offline_ms_per_frame"], "ms_per_frame")
        if text and d.get("snr_db_of_kazeia") is not None:
            text += f"; Kazeia's {result['decoder_type']} audio at {d['snr_db_of_kazeia']:.1f} dB SNR against it"
        if text:
            lines.append(text)


def _placements(result: dict, lines: list[str]) -> None:
    rows = []
    for mode, p in result["placements"].items():
        if not p.get("available"):
            rows.append([mode, "unavailable", "", "", p.get("reason", "")])
            continue
        a = p["accuracy_vs_f32_cpu"]
        rows.append([mode, _ms(p["ms_per_frame"]), f"{p['rtf']:.2f}",
                     f"KL {a['talker_kl']:.1e} / {a['code_predictor_kl']:.1e}, SNR {a['decoder_snr_db']:.1f} dB",
                     "passes" if p["passes_gate"] else "FAILS the gate"])
    lines += _table(["placement", "talker / cp / decoder ms", "RTF", "accuracy vs f32 on the CPU", "gate"], rows)


def _batch(result: dict, lines: list[str]) -> None:
    lines[0] += f", {result['type']}, {result['frames_per_stream']} frames per stream"
    rows = [[b, f"{m['step_ms']['talker']:.1f} / {m['step_ms']['code_predictor']:.1f}",
             f"{m['decoder_ms_per_stream_frame']:.1f}", f"{m['lm_throughput_vs_1']:.2f}x",
             f"{m['aggregate_frames_per_s']:.1f}", f"{m['aggregate_rtf']:.2f}", f"{m['peak_rss_mb']:.0f}"]
            for b, m in result["batches"].items()]
    lines += _table(["B", "talker / cp ms per step", "decoder ms/frame", "talker+cp throughput",
                     "frames/s", "aggregate RTF", "peak MB"], rows)


def _overlap(result: dict, lines: list[str]) -> None:
    split = result["split_when_overlapped"]
    lines[0] += (f", {result['type']} with a {result['decoder_type']} decoder, {result['frames']} frames; "
                 f"overlapped: generation on {split['generation']} thread(s), the decoder on {split['decoder']}")
    rows = [[kind, name, f"{d['wall_ms_per_frame']:.1f}", _ms(d["ms_per_frame"]), f"{d['rtf']:.2f}",
             f"{d['ttfa_ms']:.0f}"]
            for kind in ("offline", "streamed") for name, d in result[kind].items() if isinstance(d, dict)]
    lines += _table(["", "stages", "wall ms/frame", "talker / cp / decoder ms as run", "RTF", "TTFA ms"], rows)
    for kind in ("offline", "streamed"):
        r = result[kind]
        lines.append(f"{kind}: overlapped {r['overlap_gain']:.2f}x the speed of taking turns; audio "
                     f"{'identical' if r['same_audio'] else 'DIFFERS'}")
    lines.append(f"medians of {result['runs']} alternating round(s)")


def _contend(result: dict, lines: list[str]) -> None:
    rows = [[name, f"{p['idle']['rtf']:.2f}", f"{p['contended']['rtf']:.2f}",
             f"{p['contended_over_idle_rtf']:.2f}x", _ms(p["contended"]["ms_per_frame"])]
            for name, p in result["policies"].items()]
    lines += _table(["threads", "idle RTF", f"RTF, {result['contend']} busy", "ratio", "contended ms"], rows)


# each stage's lines after the first (which each may add to)
_STAGES = {"cpu_levels": _cpu_levels, "long": _long, "book": _book, "agent": _agent, "serve": _serve, "all": _all,
           "decoder": _decoder, "placements": _placements, "batch": _batch, "overlap": _overlap, "contend": _contend}


def summary(result: dict) -> str:
    stage = result.get("stage")
    head = f"{result.get('model', '')}: {result.get('size', '')}, threads {result.get('threads')}"
    lines = [head]
    if result.get("machine"):
        m = result["machine"]
        lines[0] += f" on {m['cpu']} (kernels {m['cpu_level']}, ggml {m['ggml_build']})"
    table = _STAGES.get(stage)
    if table is not None:
        table(result, lines)
    return "\n".join(lines)
