"""A book rendered to a folder: every chapter planned and checked before anything is spoken, its
chunks made on the batched engine and kept on disk as they end (chunks.py), each chapter written
from them once they are all there (assemble.py), then the finished files (export.py): chapter files,
subtitles, one M4B, with one loudness gain per book or per chapter (loudness.py).

OUT/.kazeia-book/ holds the work: chunks/ (the chunk store), chapters/ (each chapter as spoken, float32
WAV, with its cues and loudness) and redo.json (chunks given a new seed). Running again resumes: the
chunks on disk are kept, chapters whose chunks did not change are not written again, and the
finished files are the same bytes as one uninterrupted run's."""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

import numpy as np

from ..atomic import atomic_path, atomic_write_text
from ..synthesis.long_text import PlanError
from ..synthesis.requests import MAX_BATCH, Request, SamplingParams
from ..text.compose import Composition, chunk_seed
from ..text.join import JoinSettings
from ..text.markup import MarkupError
from ..untrusted import fresh_folder
from ..long_take.assemble import Assembled, Cue, assemble
from ..long_take.chunks import ChunkJob, ChunkStore, make_chunks, model_identity, request_digest
from .export import (CHAPTER_FORMATS, ExportChapter, book_name, chapter_path, remove_partials, write_chapter,
                     write_m4b)
from ..takes.loudness import LoudnessTarget, gain_db, integrated_loudness
from .source import Book, BookError, Chapter
from ..long_take.subtitles import write_subtitles

WORK = ".kazeia-book"
SUBTITLE_FORMATS = ("srt", "vtt")


@dataclass
class BookOptions:
    out_dir: Path
    formats: tuple[str, ...] = ("flac",)           # chapter files (export.CHAPTER_FORMATS); () for none
    m4b: bool = True                               # one M4B with chapter marks
    subtitles: tuple[str, ...] = SUBTITLE_FORMATS  # per chapter, and for the M4B
    loudness: LoudnessTarget | None = field(default_factory=LoudnessTarget)   # None: left as spoken
    # what decides the audio, each chapter's text aside: the voice, language, lexicon, budget, pauses and
    # join; its sampling (None: the model's defaults) with the book's seed (chapter k's chunks: compose's
    # seeds from chunk_seed(seed, k)) and each chunk's frame limit (tests and benches: random weights never stop)
    request: Request = field(default_factory=lambda: Request(""))
    batch: int = 4
    chapter_pause_ms: float = 1000.0               # silence after each chapter's title
    chapters: list[int] | None = None              # chapter numbers (1-based, among those read) to render

    def validate(self) -> None:
        unknown = [f for f in self.formats if f not in CHAPTER_FORMATS]
        if unknown:
            raise ValueError(f"unknown chapter format {unknown[0]!r}; choose {', '.join(CHAPTER_FORMATS)}")
        bad = [f for f in self.subtitles if f not in SUBTITLE_FORMATS]
        if bad:
            raise ValueError(f"unknown subtitle format {bad[0]!r}; choose srt, vtt")
        if not 1 <= self.batch <= MAX_BATCH:
            raise ValueError(f"batch must be from 1 to {MAX_BATCH}, got {self.batch!r}")
        self.request.validate()   # every number checked before any chunk is made (NaN fails every range)
        if not 0 <= self.chapter_pause_ms <= 60_000:
            raise ValueError(f"chapter_pause_ms must be from 0 to 60000, got {self.chapter_pause_ms!r}")
        if self.loudness is not None:
            self.loudness.validate()


@dataclass
class PlannedChapter:
    number: int                    # 1-based, among the chapters read
    chapter: Chapter
    composition: Composition
    jobs: list[ChunkJob]           # one per chunk, in order

    @property
    def digests(self) -> list[str]:
        return [j.hash for j in self.jobs]


@dataclass
class BookPlan:
    book: Book
    options: BookOptions
    chapters: list[PlannedChapter]

    @property
    def work(self) -> Path:
        return Path(self.options.out_dir) / WORK


def spoken_text(chapter: Chapter, pause_ms: float) -> str:
    """The chapter's text with a pause after its title (its first paragraph) when it has more."""
    title, sep, rest = chapter.text.partition("\n\n")
    if not sep or not pause_ms:
        return chapter.text
    # (the pause tag ends the title's own line: every line keeps its number and column)
    return f"{title} [pause:{pause_ms:g}ms]\n\n{rest}"


def _only_markup(chapter: Chapter) -> bool:
    """Text after the title, all of it markup (a part divider with no text at all is its title alone)."""
    from ..text.markup import Speech, parse
    _, _, body = chapter.text.partition("\n\n")
    if not body.strip():
        return False
    try:
        return not any(isinstance(item, Speech) and item.text.strip() for item in parse(body))
    except MarkupError:
        return False   # (compose names it, with its line and column)


def _redo_seeds(work: Path) -> dict[str, int]:
    try:
        data = json.loads((work / "redo.json").read_text(encoding="utf-8"))
        return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def set_redo_seed(out_dir: str | Path, chapter: int, chunk: int, seed: int) -> None:
    """Chunk `chunk` (0-based) of chapter `chapter` (1-based) made with `seed` from now on: the next
    render makes that chunk alone again and rewrites its chapter's files."""
    work = Path(out_dir) / WORK
    work.mkdir(parents=True, exist_ok=True)
    seeds = _redo_seeds(work)
    seeds[f"{chapter}:{chunk}"] = int(seed)
    atomic_write_text(work / "redo.json", json.dumps(seeds, indent=1))


def plan_book(book: Book, engine, options: BookOptions) -> BookPlan:
    """Every chapter planned into chunks by the engine (Engine.plan: composed, every chunk checked);
    raises BookError listing every problem (markup with chapter, line and column; unknown voices; a
    chunk the model refuses)."""
    options.validate()
    chapters = book.read_chapters
    wanted = options.chapters or list(range(1, len(chapters) + 1))
    problems: list[tuple[str, str]] = []
    for n in wanted:
        if not 1 <= n <= len(chapters):
            problems.append(("", f"no chapter {n}: the book has chapters 1 to {len(chapters)}"))
    sampling = options.request.sampling or SamplingParams.from_model(engine.info)
    model = model_identity(engine.info)
    seeds = _redo_seeds(Path(options.out_dir) / WORK)
    planned = []
    for n in (n for n in wanted if 1 <= n <= len(chapters)):
        chapter = chapters[n - 1]
        label = f"chapter {n} ({chapter.title})"
        redone = {int(k.partition(":")[2]): seed for k, seed in seeds.items() if int(k.partition(":")[0]) == n}
        request = replace(options.request, text=spoken_text(chapter, options.chapter_pause_ms),
                          sampling=replace(sampling, seed=chunk_seed(sampling.seed, n)), chunk_seeds=redone)
        refused = []
        try:
            take = engine.plan(request)
        except PlanError as e:   # (said after what is wrong with the chapter as a whole)
            take, refused = None, e.problems
        except MarkupError as e:
            problems.append((f"{label}, {chapter.where(e.line, e.column)}", str(e).split(": ", 1)[-1]))
            continue
        except ValueError as e:
            problems.append((label, str(e)))
            continue
        if _only_markup(chapter):
            problems.append((f"{label}, {chapter.where(3)}", "the chapter has markup but no words to say "
                                                             "(after its title)"))
            continue
        problems += [(f"{label}, {chapter.where(c.at.line, c.at.column)}", why) for c, why in refused]
        if take is not None:
            jobs = [ChunkJob(r, request_digest(r, model), (n, c.index))
                    for c, r in zip(take.composition.chunks, take.chunks)]
            planned.append(PlannedChapter(n, chapter, take.composition, jobs))
    if problems:
        raise BookError(book.path, problems)
    return BookPlan(book, options, planned)


@dataclass
class Progress:
    """What a render has done so far (handed to `on_progress` as chunks end and chapters are written)."""
    chunks_total: int
    chunks_done: int = 0            # on disk, kept from before included
    chunks_kept: int = 0            # from an earlier run
    chapter_chunks: dict[int, tuple[int, int]] = field(default_factory=dict)   # chapter -> (done, total)
    chapters_written: list[int] = field(default_factory=list)
    audio_seconds: float = 0.0      # of the chunks made in this run
    started: float = field(default_factory=time.perf_counter)
    stage: str = "speaking"         # speaking | writing | finished | stopped

    @property
    def seconds_left(self) -> float:
        """Time left to make the remaining chunks, at this run's pace so far (nan until a chunk ends)."""
        made = self.chunks_done - self.chunks_kept
        if made <= 0:
            return math.nan
        return (time.perf_counter() - self.started) / made * (self.chunks_total - self.chunks_done)


@dataclass
class BookResult:
    plan: BookPlan
    chapters: list[Assembled]
    gains_db: list[float]
    files: list[Path]
    notes: list[str]
    progress: Progress
    loudness: float = math.nan      # the book's, as spoken (LUFS)
    stopped: bool = False

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.chapters)


def _chapter_meta(work: Path, number: int) -> Path:
    return work / "chapters" / f"{number:03d}.json"


def _kept_chapter(work: Path, planned: PlannedChapter, rate: int) -> Assembled | None:
    """A chapter written by an earlier run from the same chunks, whole."""
    import soundfile
    meta_path = _chapter_meta(work, planned.number)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        raw = meta_path.with_suffix(".wav")
        if meta["digests"] != planned.digests or soundfile.info(str(raw)).frames != meta["samples"]:
            return None
        hops = np.load(meta_path.with_suffix(".npy"))
    except (OSError, ValueError, KeyError, RuntimeError):
        return None
    cues = [Cue(**c) for c in meta["cues"]]
    return Assembled(raw, meta["samples"], rate, cues, hops, meta["loudness"], meta["true_peak"])


def _write_chapter(work: Path, planned: PlannedChapter, store: ChunkStore, join: JoinSettings) -> Assembled:
    meta_path = _chapter_meta(work, planned.number)
    meta_path.parent.mkdir(parents=True, exist_ok=True)
    done = assemble(planned.composition, planned.digests, store, meta_path.with_suffix(".wav"), join)
    with atomic_path(meta_path.with_suffix(".npy")) as partial:
        with open(partial, "wb") as f:
            np.save(f, done.loudness_hops)
    meta = {"digests": planned.digests, "samples": done.samples, "sample_rate": done.sample_rate, "loudness": done.loudness,
            "true_peak": done.true_peak, "cues": [vars(c) for c in done.cues]}
    atomic_write_text(meta_path, json.dumps(meta, ensure_ascii=False))   # (last: the chapter counts from here)
    return done


def render_book(plan: BookPlan, engine, on_progress: Callable[[Progress], None] | None = None,
                stop: Callable[[], bool] = lambda: False, executor=None) -> BookResult:
    """Speaks what is missing, writes each chapter as its chunks are all there, then the finished
    files. `executor`: where the chunks are made (engine/script/cluster.py's RayExecutor; None: `engine`).
    `stop()` true: the chunks in flight are dropped and the result says `stopped` (run again to
    resume)."""
    options, work = plan.options, plan.work
    out = Path(options.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    remove_partials(out)
    rate = engine.info.sample_rate
    fresh_folder(work, "book's work folder")   # (a symlink left there is refused, never followed)
    store = ChunkStore(work / "chunks", rate)
    progress = Progress(sum(len(c.jobs) for c in plan.chapters))
    missing: list[ChunkJob] = []
    waiting: dict[int, int] = {}
    for chapter in plan.chapters:
        left = [j for j in chapter.jobs if not store.has(j.hash)]
        missing += left
        waiting[chapter.number] = len(left)
        progress.chapter_chunks[chapter.number] = (len(chapter.jobs) - len(left), len(chapter.jobs))
    progress.chunks_kept = progress.chunks_done = progress.chunks_total - len(missing)
    written: dict[int, Assembled] = {}
    by_number = {c.number: c for c in plan.chapters}

    def write_if_ready(number: int) -> None:
        if waiting[number] == 0 and number not in written:
            planned = by_number[number]
            written[number] = (_kept_chapter(work, planned, rate)
                               or _write_chapter(work, planned, store, options.request.join or JoinSettings()))
            progress.chapters_written.append(number)

    for chapter in plan.chapters:
        write_if_ready(chapter.number)
    if on_progress:
        on_progress(progress)
    for done in make_chunks(engine, missing, store, options.batch, stop, checked=True, executor=executor):
        number, _ = done.job.tag
        waiting[number] -= 1
        have, total = progress.chapter_chunks[number]
        progress.chapter_chunks[number] = (have + 1, total)
        progress.chunks_done += 1
        progress.audio_seconds += done.samples / rate
        write_if_ready(number)
        if on_progress:
            on_progress(progress)
    if len(written) < len(plan.chapters):
        progress.stage = "stopped"
        if on_progress:
            on_progress(progress)
        return BookResult(plan, [written[n] for n in sorted(written)], [], [], [], progress, stopped=True)
    progress.stage = "writing"
    if on_progress:
        on_progress(progress)
    chapters = [written[c.number] for c in plan.chapters]
    if options.chapters is None:   # (chunks of earlier seeds or text: no longer part of the book)
        store.remove_except({d for c in plan.chapters for d in c.digests})
    result = _finish(plan, chapters, progress)
    progress.stage = "finished"
    if on_progress:
        on_progress(progress)
    return result


def _finish(plan: BookPlan, chapters: list[Assembled], progress: Progress) -> BookResult:
    """Gains, chapter files, subtitles, the M4B and book.json."""
    options, book = plan.options, plan.book
    out = Path(options.out_dir)
    book_loudness = integrated_loudness([c.loudness_hops for c in chapters])
    book_peak = max(c.true_peak for c in chapters)
    gains, notes = [], []
    for planned, chapter in zip(plan.chapters, chapters):
        if options.loudness is None:
            gains.append(0.0)
            continue
        if options.loudness.per == "book":
            gain, note = gain_db(book_loudness, book_peak, options.loudness)
        else:
            gain, note = gain_db(chapter.loudness, chapter.true_peak, options.loudness)
            note = f"chapter {planned.number}: {note}" if note else ""
        gains.append(gain)
        if note and note not in notes:
            notes.append(f"the book {note}" if options.loudness.per == "book" else note)
    width = max(2, len(str(len(book.read_chapters))))
    files: list[Path] = []
    exports = [ExportChapter(p.chapter.title, c.path, g) for p, c, g in zip(plan.chapters, chapters, gains)]
    for planned, chapter, export in zip(plan.chapters, chapters, exports):
        for fmt in options.formats:
            files.append(write_chapter(export, chapter_path(out, planned.number, planned.chapter.title, fmt, width), fmt))
        for fmt in options.subtitles:
            path = chapter_path(out, planned.number, planned.chapter.title, "wav", width).with_suffix(f".{fmt}")
            files.append(write_subtitles(path, chapter.cues, chapter.sample_rate))
    if options.m4b:
        name = book_name(book.title)   # (never a chapter's name: "01 - One" would overwrite its subtitles)
        spans = write_m4b(exports, out / f"{name}.m4b", book.title, book.author, book.cover, book.cover_type)
        files.append(out / f"{name}.m4b")
        whole = [replace(cue, start=cue.start + start, end=cue.end + start)
                 for chapter, (start, _) in zip(chapters, spans) for cue in chapter.cues]
        for fmt in options.subtitles:
            files.append(write_subtitles(out / f"{name}.{fmt}", whole, chapters[0].sample_rate))
    summary = {"title": book.title, "author": book.author, "loudness_lufs": _finite(book_loudness),
               "true_peak_dbtp": _finite(book_peak),
               "target": vars(options.loudness) if options.loudness else None, "notes": notes,
               "chapters": [{"number": p.number, "title": p.chapter.title, "seconds": round(c.seconds, 3),
                             "chunks": len(p.jobs), "loudness_lufs": _finite(c.loudness),
                             "true_peak_dbtp": _finite(c.true_peak), "gain_db": round(g, 3)}
                            for p, c, g in zip(plan.chapters, chapters, gains)],
               "files": [f.name for f in files]}
    atomic_write_text(out / "book.json", json.dumps(summary, indent=1, ensure_ascii=False))
    return BookResult(plan, chapters, gains, files, notes, progress, book_loudness)


def clock(seconds: float) -> str:
    """A duration as the CLI and the Book dialog show it: m:ss or h:mm:ss; --:-- while unknown (nan)."""
    if seconds != seconds:
        return "--:--"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _finite(x: float) -> float | None:
    return round(x, 3) if math.isfinite(x) else None
