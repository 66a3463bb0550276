"""`kazeia bench`: benchmarks on full-size random weights (JSON)."""
from __future__ import annotations


from .options import (THREADS_HELP, batch_sizes, thread_count)


def add_parser(sub) -> None:
    from ..model_files.gguf_file import HALF_OR_F32, type_mix_arg
    from ..model_files.random_model import SIZES
    b = sub.add_parser("bench", help="benchmark on full-size random weights (JSON)")
    b.add_argument("--stage", choices=["all", "decoder"], default="all",
                   help="all: the whole pipeline per stage (default); decoder: the speech decoder alone")
    b.add_argument("--type", type=type_mix_arg, default=None, metavar="TYPE",
                   help="talker / code-predictor weights: a type or a per-stage mix (default q8_0; for --agent "
                        "the size's gate-passing mix, as kazeia pull converts)")
    b.add_argument("--divergence", nargs="*", type=type_mix_arg, default=None, metavar="TYPE",
                   help="also measure these types or mixes against f32 (logit KL, top-5, vox's gate per stage, "
                        "code agreement)")
    b.add_argument("--placements", nargs="*", choices=["cpu", "accel-weights", "accel-sched"], default=None,
                   help="time every placement (all when none named) stage by stage, with where each launch ran "
                        "and its accuracy against f32 on the CPU")
    b.add_argument("--contend", type=int, default=None, metavar="N",
                   help="time the pipeline idle and with N busy processes pinned to cores, alternating, at the "
                        "default thread policy and at a fixed count")
    b.add_argument("--cpu", type=lambda v: [x.strip() for x in v.split(",") if x.strip()], default=None,
                   metavar="LEVEL,...", help="also run at these CPU levels of Kazeia's kernels (x86-64: avx512, avxvnni, avx2; ARM64: "
                                            "i8mm, dotprod, neon; generic; "
                                            "KAZEIA_CPU), beside the default, alternating, one process per run")
    b.add_argument("--ggml-lib", default=None, metavar="DIR|LEVEL=DIR,...",
                   help="with --cpu: run the other levels on the ggml libraries in DIR (e.g. a build for AVX2 alone), "
                        "or each named level on its own (avxvnni=DIR1,avx2=DIR2), so that ggml's kernels stop at "
                        "that level too")
    b.add_argument("--overlap", action="store_true",
                   help="the decoder beside generation against the stages taking turns, alternating, offline and "
                        "streamed: wall ms per frame, RTF, TTFA, the gain, and whether the audio is the same")
    b.add_argument("--batch", type=batch_sizes, default=None, metavar="B,B,...",
                   help="many voices at once: time batches of these sizes (with 1) side by side: per-stream ms per "
                        "frame, aggregate frames per second and RTF, peak RSS")
    b.add_argument("--long", action="store_true",
                   help="a ~2,000-character text through the long-text front end: its chunks batched "
                        "(--batch, default 4) against one at a time, and TTFA against one sentence")
    b.add_argument("--book", nargs="?", const="memory,chapter,resume", default=None, metavar="PARTS",
                   help="memory: books of 2, 8 and 32 chapters through `kazeia book`, peak memory against the "
                        "audio's length; chapter: one batched against chunk after chunk; resume: a kill -9 and "
                        "the same command (default: all three; --frames caps each chunk, default 24)")
    b.add_argument("--serve", action="store_true",
                   help="the speech server on loopback with --clients concurrent streaming clients: p50/p95 TTFA "
                        "and aggregate throughput per count (--frames each, default 100)")
    b.add_argument("--agent", action="store_true",
                   help="language models writing an answer at --rates tokens/s to --clients sockets at once, spoken "
                        "live and a request per sentence side by side: first audio, stalls, throughput; and what a "
                        "waiting live turn costs the others")
    b.add_argument("--rates", type=lambda v: [float(x) for x in v.split(",") if x.strip()], default=[10, 30, 100, 0],
                   metavar="R,R,...", help="tokens a second the answer is written at, for --agent (0: all at once)")
    b.add_argument("--holds", type=lambda v: [float(x) for x in v.split(",") if x.strip()], default=[0.0],
                   metavar="MS,MS,...", help="for --agent: live turns that start once the text holds this much "
                                             "reading (the live socket's hold_ms), each side by side")
    b.add_argument("--clients", type=batch_sizes, default=None, metavar="N,N,...",
                   help="client counts for --serve (default 1,2,4,8) and --agent (default 1,4)")
    b.add_argument("--size", choices=SIZES, default="0.6b", help="random model to make and measure")
    b.add_argument("--frames", type=int, default=None,
                   help="frames per utterance (default 50; with --long a cap per chunk, default none)")
    b.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    b.add_argument("--runs", type=int, default=1,
                   help="alternate this many Kazeia and peer runs and report each one's median run")
    b.add_argument("--decoder-type", choices=HALF_OR_F32, default=None, help="default f16 (stage all), f32 (decoder)")
    b.add_argument("--model", default=None, help='benchmark this file (or "demo") instead of a cached random model')
    b.add_argument("--no-reference", action="store_true", help="skip the PyTorch reference")
    b.add_argument("--no-peers", action="store_true",
                   help="skip peer engines (vox-tts and qwen3synth; with --stage decoder ONNX Runtime; when "
                        "installed: all engines then run one shared checkpoint)")
    b.add_argument("--json", default=None, help="write the whole result as JSON to this file (- for the terminal)")
    b.add_argument("-q", "--quiet", action="store_true")
    b.set_defaults(func=run)


def run(args) -> int:
    from ..bench import main_bench
    return main_bench(args)
