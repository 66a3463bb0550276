"""`kazeia render`: a script to a folder of audio files, resumably."""
from __future__ import annotations

import sys
from pathlib import Path

from .options import THREADS_HELP, add_ray_arguments, thread_count


def add_parser(sub) -> None:
    rn = sub.add_parser("render", help="render a script (.txt, .csv, .tsv, .jsonl) to a folder of audio files, resumably")
    rn.add_argument("script", help="one utterance per line (.txt), or columns id, text and optionally speaker, language, "
                                   "instruct, voice, seed, file, temperature, top_k, top_p, ... (.csv/.tsv/.jsonl)")
    rn.add_argument("--model", required=True, help='a GGUF file, or "demo"')
    rn.add_argument("-o", "--output", required=True, help="folder for the audio files and manifest.jsonl")
    rn.add_argument("--format", choices=["wav", "wav16", "flac"], default="wav",
                    help="wav: 32-bit float (default); wav16: 16-bit PCM; flac: 24-bit")
    rn.add_argument("--name", default="{id}", help="output file name: {id}, {index}, {speaker} (default {id}; a "
                                                   "line's own 'file' column wins)")
    rn.add_argument("--batch", type=int, default=4, help="lines generated together (default 4)")
    rn.add_argument("--resume", action="store_true",
                    help="keep lines already rendered from the same request (their file complete), render the rest")
    rn.add_argument("--seed", type=int, default=0, help="seed of lines without their own (default 0)")
    rn.add_argument("--speaker", default=None, help="speaker of lines without one (CustomVoice models)")
    rn.add_argument("--language", default=None, help="language of lines without one (default auto)")
    rn.add_argument("--instruct", default=None, help="instruction of lines without one (VoiceDesign models)")
    rn.add_argument("--voice", default=None, help="voice profile of lines without one (Base models)")
    rn.add_argument("--skip-invalid", action="store_true", help="render the valid lines; list the others")
    rn.add_argument("--lexicon", action="append", default=None,
                    help="pronunciation rules (.toml or .csv) for every line; repeat to add files, later ones win")
    add_ray_arguments(rn, "render")
    rn.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    rn.add_argument("-q", "--quiet", action="store_true")
    rn.set_defaults(func=run)


def run(args) -> int:
    from tqdm import tqdm

    from ..model_files.demo import resolve_model
    from ..script.render import LocalExecutor, RenderOptions, plan_render, render
    from ..synthesis.engine import Engine
    model_path = resolve_model(args.model)
    engine = Engine.load(model_path, threads=args.threads)
    options = RenderOptions(Path(args.output), fmt=args.format, name=args.name, batch=args.batch,
                            resume=args.resume, seed=args.seed, skip_invalid=args.skip_invalid, speaker=args.speaker,
                            language=args.language, instruct=args.instruct,
                            voice=str(Path(args.voice).resolve()) if args.voice else None)
    if args.lexicon:
        from ..text.lexicon import load_lexicons
        options.lexicon, options.lexicon_digest = load_lexicons(args.lexicon)
    plan = plan_render(args.script, engine, options)
    for n, ident, why in plan.invalid:
        print(f"skipped line {n}{f' ({ident})' if ident else ''}: {why}", file=sys.stderr)
    if plan.kept:
        print(f"resume: {len(plan.kept)} line(s) already rendered and unchanged", file=sys.stderr)
    if args.ray is not None:
        from ..script.cluster import RayExecutor
        executor = RayExecutor(model_path, address=None if args.ray == "local" else args.ray, batch=args.batch,
                               threads=args.threads, node_model=args.node_model)
    else:
        executor = LocalExecutor(engine, args.batch)
    bar = tqdm(total=len(plan.jobs), unit="line", desc="render", disable=args.quiet or not sys.stderr.isatty())

    def on_line(job, entry, summary):
        bar.update(1)
        bar.set_postfix_str(f"{summary.audio_seconds:.0f} s audio, RTF {summary.rtf:.2f}")
        if entry["status"] == "failed":
            bar.write(f"line {job.line.number} ({job.line.id}) failed: {entry['error']}", file=sys.stderr)
        elif entry.get("warning"):
            bar.write(f"line {job.line.number} ({job.line.id}): {entry['warning']}", file=sys.stderr)
        elif not bar.disable:
            return
        elif not args.quiet:
            print(f"{job.line.id}: {entry['status']} ({summary.done + summary.failed}/{len(plan.jobs)})",
                  file=sys.stderr)
    try:
        summary = render(plan, executor, on_line)
    finally:
        bar.close()
        close = getattr(executor, "close", None)
        if close:
            close()
    speed = (f"; {summary.audio_seconds:.1f} s of audio in {summary.wall_seconds:.1f} s (RTF {summary.rtf:.2f})"
             if summary.audio_seconds else "")
    print(f"{args.output}: {summary.done} rendered, {summary.kept} kept, {summary.failed} failed, "
          f"{summary.skipped} skipped, {summary.warnings} warning(s){speed}; manifest "
          f"{Path(args.output) / 'manifest.jsonl'}")
    return 0 if summary.ok and not summary.skipped else 1
