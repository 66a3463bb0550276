"""`kazeia bench`: speed on full-size random weights (same cost per frame as the released models), with
the PyTorch reference and peer engines side by side when their interpreters are available. A short
table on the terminal; the whole result as JSON with --json. One module per kind of run:
pipeline, decoder, batch, contend, overlap, placement; models, peers, divergence, compute and report serve them."""
from __future__ import annotations

import json
from pathlib import Path

def main_bench(args) -> int:
    frames_cap, args.frames = args.frames, args.frames or 50   # (--long: only a cap the user asked for)
    if args.type is None:   # (live speech is measured on what users run: the size's gate-passing mix)
        from ..models.catalog import FALLBACK_TYPE, default_type
        args.type = default_type(args.size.upper()) if args.agent else FALLBACK_TYPE
    if args.cpu is not None:
        from .cpu_levels import bench_levels
        result = bench_levels(tuple(args.cpu), size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                              frames=args.frames, threads=args.threads, runs=args.runs, model_path=args.model,
                              progress=not args.quiet, ggml_lib=args.ggml_lib)
    elif args.serve:
        from .serve import bench_serve
        result = bench_serve(tuple(args.clients or [1, 2, 4, 8]), size=args.size, out_type=args.type,
                             decoder_type=args.decoder_type or "f16", frames=frames_cap or 100, threads=args.threads,
                             runs=args.runs, model_path=args.model, progress=not args.quiet)
    elif args.agent:
        from .agent import bench_agent
        result = bench_agent(size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                             rates=tuple(args.rates), counts=tuple(args.clients or [1, 4]), frames=frames_cap or 120,
                             threads=args.threads, runs=args.runs, model_path=args.model, progress=not args.quiet,
                             holds=tuple(args.holds))
    elif args.book:
        from .book import bench_book
        result = bench_book(size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                            batch=max(args.batch or [4]), threads=args.threads, runs=args.runs,
                            model_path=args.model, frames_cap=frames_cap or 24, progress=not args.quiet,
                            parts=tuple(p.strip() for p in args.book.split(",") if p.strip()))
    elif args.long:
        from .long import bench_long
        result = bench_long(size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                            batch=max(args.batch or [4]), threads=args.threads, runs=args.runs,
                            model_path=args.model, frames_cap=frames_cap,
                            progress=not args.quiet)
    elif args.batch is not None:
        from .batch import bench_batch
        result = bench_batch(tuple(args.batch), size=args.size, out_type=args.type,
                             decoder_type=args.decoder_type or "f16", frames=args.frames, threads=args.threads,
                             runs=args.runs, model_path=args.model, progress=not args.quiet)
    elif args.overlap:
        from .overlap import bench_overlap
        result = bench_overlap(size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                               frames=args.frames, threads=args.threads, runs=args.runs, model_path=args.model,
                               progress=not args.quiet)
    elif args.contend is not None:
        from .contend import bench_contend
        result = bench_contend(args.contend, size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                               frames=args.frames, runs=args.runs, threads=args.threads, model_path=args.model,
                               progress=not args.quiet)
    elif args.placements is not None:
        from .placement import bench_placements
        result = bench_placements(tuple(args.placements) or ("cpu", "accel-weights", "accel-sched"), size=args.size,
                                  out_type=args.type, decoder_type=args.decoder_type or "f16", frames=args.frames,
                                  threads=args.threads, progress=not args.quiet)
    elif args.stage == "decoder":
        from .decoder import bench_decoder
        result = bench_decoder(size=args.size, frames=args.frames, threads=args.threads,
                               decoder_type=args.decoder_type or "f32", reference=not args.no_reference,
                               model_path=args.model, progress=not args.quiet, peers=not args.no_peers,
                               runs=args.runs)
    else:
        from .pipeline import bench_tts
        result = bench_tts(size=args.size, out_type=args.type, decoder_type=args.decoder_type or "f16",
                           frames=args.frames, threads=args.threads, reference=not args.no_reference,
                           divergence_types=tuple(args.divergence or ()), model_path=args.model,
                           progress=not args.quiet, peers=not args.no_peers, runs=args.runs)
    if "machine" not in result:   # every figure says which CPU, level and ggml build made it
        from ..platform_info import machine_info
        result["machine"] = machine_info()
    from .report import summary
    text = json.dumps(result, indent=2)
    if args.json == "-":
        print(text)
    else:
        print(summary(result))
        if args.json:
            Path(args.json).write_text(text + "\n")
    return 0
