"""`kazeia book`: a book (EPUB, Markdown, plain text) to a folder of chapter files, subtitles and an
M4B with chapter marks, resumably (docs/books.md)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .options import DefaultsHelpFormatter, PAUSE_OPTIONS, THREADS_HELP, add_ray_arguments, as_options, thread_count


def chapter_numbers(text: str) -> list[int]:
    """"1-3,5" -> [1, 2, 3, 5]."""
    numbers: list[int] = []
    try:
        for part in text.split(","):
            first, _, last = part.strip().partition("-")
            numbers += range(int(first), int(last or first) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"chapters are numbers and ranges, e.g. 1-3,5; got {text!r}") from None
    if not numbers or min(numbers) < 1:
        raise argparse.ArgumentTypeError(f"chapters are numbered from 1; got {text!r}")
    return sorted(set(numbers))


def redo_spec(text: str) -> tuple[int, int, int | None]:
    """"CHAPTER:CHUNK[:SEED]" (chapter and chunk as --list numbers them, from 1)."""
    parts = text.split(":")
    try:
        if len(parts) in (2, 3) and int(parts[0]) >= 1 and int(parts[1]) >= 1:
            return int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else None
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"--redo takes CHAPTER:CHUNK or CHAPTER:CHUNK:SEED (from 1), got {text!r}")


def add_parser(sub) -> None:
    b = sub.add_parser("book", help="speak a book (EPUB, Markdown, text) into chapter files, subtitles and an M4B",
                       formatter_class=DefaultsHelpFormatter,
                       description="Every chapter is checked before anything is spoken; chunks are kept on disk "
                                   "as they are made, so running the same command again after a stop resumes.")
    b.add_argument("book", help=".epub (without DRM), .md / .markdown, or .txt")
    b.add_argument("--model", help='a GGUF file, a registered name (kazeia models), or "demo"')
    b.add_argument("-o", "--output", help="folder for the book's files (and its work folder, .kazeia-book)")
    b.add_argument("--list", action="store_true", help="list the chapters (read and skipped) and their text; speak nothing")
    b.add_argument("--chapters", type=chapter_numbers, default=None, help="only these chapters, e.g. 1-3,5")
    b.add_argument("--notes", choices=["skip", "read"], default="skip", help="EPUB footnotes and endnotes")
    b.add_argument("--front-matter", action="store_true",
                   help="read the text before the first chapter heading (Markdown, text)")
    b.add_argument("--speaker", default=None, help="CustomVoice speaker")
    b.add_argument("--language", default="auto", help="a language the model knows, or auto")
    b.add_argument("--instruct", default=None, help="voice description (VoiceDesign, 1.7B CustomVoice)")
    b.add_argument("--voice", default=None, help="voice profile (Base models): a voice of the library or a .kzvoice file")
    b.add_argument("--seed", type=int, default=0, help="sampling seed (the same seed gives the same book)")
    b.add_argument("--format", action="append", choices=["wav", "wav16", "flac", "mp3", "opus"], default=None,
                   help="chapter files (repeat for several; default flac)")
    b.add_argument("--no-m4b", dest="m4b", action="store_false", help="no M4B of the whole book")
    b.add_argument("--subtitles", default="srt,vtt", help="srt, vtt, both (srt,vtt) or none")
    b.add_argument("--loudness", type=float, default=-20.0,
                   help="integrated loudness to reach, LUFS (EBU R128: -23; audiobook stores: -18 to -20)")
    b.add_argument("--no-loudness", action="store_true", help="leave the loudness as spoken")
    b.add_argument("--true-peak", type=float, default=-3.0, help="true-peak ceiling, dBTP")
    b.add_argument("--loudness-per", choices=["book", "chapter"], default="book",
                   help="one gain for the whole book, or one per chapter (never per sentence)")
    b.add_argument("--redo", type=redo_spec, action="append", default=None, metavar="CHAPTER:CHUNK[:SEED]",
                   help="make one chunk again with a new seed (the next one when none is given); the rest is kept")
    b.add_argument("--pause-sentence", type=float, default=150.0, help="ms of silence between chunks")
    b.add_argument("--pause-paragraph", type=float, default=600.0, help="ms of silence at a paragraph break")
    b.add_argument("--pause-title", type=float, default=1000.0, help="ms of silence after a chapter's title")
    b.add_argument("--max-chars", type=int, default=250, help="characters per chunk at most")
    b.add_argument("--max-tokens", type=int, default=64, help="text tokens per chunk at most")
    b.add_argument("--max-frames", type=int, default=None, help="frames per chunk at most (default: from its text)")
    b.add_argument("--lexicon", action="append", default=None, help="pronunciation rules (.toml or .csv)")
    b.add_argument("--batch", type=int, default=4, help="chunks synthesized together")
    add_ray_arguments(b, "make the chunks")
    b.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    b.add_argument("--placement", default="cpu", choices=["cpu", "accel-weights", "accel-sched"],
                   help="where the stages run")
    b.add_argument("-q", "--quiet", action="store_true")
    b.set_defaults(func=run)


def list_chapters(book) -> None:
    print(f"{book.title}" + (f" by {book.author}" if book.author else "") + f" ({book.path.name})")
    n = 0
    for chapter in book.chapters:
        if chapter.read:
            n += 1
            first = " ".join(chapter.text.split())[:70].replace("\\[", "[").replace("\\]", "]")
            print(f"{n:4d}  {chapter.title[:50]:50s} {chapter.words:7d} words  {first}")
        else:
            print(f"   -  {chapter.title[:50]:50s} skipped: {chapter.skip_reason}")


def run(args) -> int:
    from ..book.source import BookError, read_book
    from ..model_files.demo import resolve_model
    from ..synthesis.engine import Engine
    try:
        book = read_book(args.book, notes=args.notes, front_matter=args.front_matter)
    except BookError as e:
        print(f"kazeia book: {e}", file=sys.stderr)
        return 2
    if args.list:
        list_chapters(book)
        return 0
    if not args.model or not args.output:
        print("kazeia book: error: --model and -o/--output are needed to speak the book (--list needs neither)",
              file=sys.stderr)
        return 2
    options = book_options(args)
    model_path = resolve_model(args.model)
    engine = Engine.load(model_path, threads=args.threads, placement=args.placement)
    options = with_engine(options, args, engine)
    try:
        plan = plan_with_redos(book, engine, options, args.redo or ())
    except BookError as e:
        print(f"kazeia book: {e}", file=sys.stderr)
        return 2
    return speak_book(plan, engine, model_path, args)


def book_options(args):
    """The command's BookOptions, every number checked before the model loads (its sampling: the
    options' seed and frame limit, the model's defaults once it has loaded: with_engine)."""
    from ..book.render import BookOptions
    from ..synthesis.requests import Request, SamplingParams
    from ..takes.loudness import LoudnessTarget
    from ..text.compose import Pauses
    from ..text.sentences import Budget
    subtitles = tuple(s for s in args.subtitles.replace(" ", "").split(",") if s and s != "none")
    request = Request("", speaker=args.speaker, language=args.language, instruct=args.instruct,
                      sampling=SamplingParams(seed=args.seed, max_frames=args.max_frames),
                      budget=Budget(args.max_chars, args.max_tokens),
                      pauses=Pauses(args.pause_sentence, args.pause_paragraph))
    options = BookOptions(Path(args.output), formats=tuple(args.format or ("flac",)), m4b=args.m4b,
                          subtitles=subtitles,
                          loudness=None if args.no_loudness else LoudnessTarget(args.loudness, args.true_peak,
                                                                                args.loudness_per),
                          request=request, batch=args.batch, chapter_pause_ms=args.pause_title,
                          chapters=args.chapters)
    as_options(options.validate, PAUSE_OPTIONS)
    if args.lexicon:
        from ..text.lexicon import load_lexicons
        options.request.lexicon = load_lexicons(args.lexicon)[0]
    return options


def with_engine(options, args, engine):
    """`options` with what needs the model: the voice profile and the model's sampling."""
    from dataclasses import replace

    from ..synthesis.requests import SamplingParams
    voice = None
    if args.voice:
        from ..voices.voice_library import load_named_voice
        voice = load_named_voice(args.voice, engine.model)
    sampling = SamplingParams.from_model(engine.info, seed=args.seed, max_frames=args.max_frames)
    return replace(options, request=replace(options.request, voice=voice, sampling=sampling))


def plan_with_redos(book, engine, options, redos):
    """The book's plan, with each --redo's chunk given its new seed (set_redo_seed) first."""
    from ..book.render import plan_book, set_redo_seed
    from ..book.source import BookError
    plan = plan_book(book, engine, options)
    if not redos:
        return plan
    for chapter, chunk, seed in redos:
        planned = next((c for c in plan.chapters if c.number == chapter), None)
        if planned is None or chunk > len(planned.jobs):
            raise BookError(book.path, [("--redo", f"no chunk {chunk} in chapter {chapter}")])
        current = planned.jobs[chunk - 1].request.sampling.seed
        set_redo_seed(options.out_dir, chapter, chunk - 1, current + 1 if seed is None else seed)
    return plan_book(book, engine, options)


def speak_book(plan, engine, model_path, args) -> int:
    """The plan rendered (here or on Ray), its progress on stderr; the exit status."""
    from ..book.render import clock, render_book
    from ..untrusted import InputError
    shown = {"last": ""}

    def on_progress(p) -> None:
        if args.quiet:
            return
        line = (f"{p.stage}: chunks {p.chunks_done}/{p.chunks_total} ({p.chunks_kept} kept), chapters written "
                f"{len(p.chapters_written)}/{len(plan.chapters)}, time left {clock(p.seconds_left)}")
        if line != shown["last"]:
            print(line, file=sys.stderr, flush=True)
            shown["last"] = line

    executor = None
    try:
        if args.ray is not None:
            from ..script.cluster import RayExecutor
            executor = RayExecutor(model_path, address=None if args.ray == "local" else args.ray, batch=args.batch,
                                   threads=args.threads, node_model=args.node_model, placement=args.placement)
        result = render_book(plan, engine, on_progress, executor=executor)
    except KeyboardInterrupt:   # (the chunks on disk stay: the same command resumes)
        print("kazeia book: interrupted: run the same command again to resume", file=sys.stderr)
        return 130
    except InputError as e:   # (a work folder that is a symlink: refused before any chunk is made)
        print(f"kazeia book: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError) as e:   # (no Ray, a node without the model, a chunk failed there)
        print(f"kazeia book: {e}", file=sys.stderr)
        return 1
    finally:
        if executor is not None:
            executor.close()
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if result.stopped:
        print("stopped: run the same command again to resume", file=sys.stderr)
        return 1
    print(f"wrote {len(result.files)} file(s) to {plan.options.out_dir}: {len(result.chapters)} chapter(s), "
          f"{clock(result.seconds)} of audio")
    return 0
