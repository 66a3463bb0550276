"""`kazeia bench --book`: what a book costs as it grows, and what a stop loses.

- Memory: `kazeia book` in a process of its own on books of 1, 4 and 16 units (a unit: two chapters of
  the long-text bench's text, text.LONG_TEXT), each chunk capped at `frames_cap` frames so a small
  model makes hours of audio quickly; its peak resident memory against the audio's length, and the
  slope of a straight line through them (MB per hour of audio: flat is ~0).
- Throughput: one chapter (LONG_TEXT) rendered with its chunks batched against one at a time,
  alternating in each round, medians.
- Resume: a render killed (SIGKILL) at a random moment (seeded), then the same command: the chunks
  it kept, those it made again (at most the chunks in flight), and the audio they held."""
from __future__ import annotations

import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median_low

from ..book.render import WORK, BookOptions, plan_book, render_book
from ..book.source import read_book
from ..synthesis.requests import Request, SamplingParams
from ..synthesis.engine import Engine
from ..synthesis.threads import available_cores, default_threads
from .models import model_path_for
from .text import LONG_TEXT

UNITS = (1, 4, 16)


def _write_book(path: Path, units: int) -> Path:
    chapters = [f"## Chapter {k + 1}\n\n{LONG_TEXT}" for k in range(2 * units)]
    path.write_text("# Benchmark Book\n\n" + "\n\n".join(chapters) + "\n", encoding="utf-8")
    return path


def _book_command(model: Path, book: Path, out: Path, speaker: str, threads: int, batch: int, cap: int) -> list[str]:
    return [sys.executable, "-m", "kazeia.engine", "book", str(book), "--model", str(model), "-o", str(out),
            "--speaker", speaker, "--threads", str(threads), "--batch", str(batch), "--max-frames", str(cap),
            "--format", "flac", "-q"]


def _peak_rss(command: list[str]) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of `command`, in a wrapper process of its own (its children only)."""
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", wrapper, *command], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"kazeia book failed: {r.stderr[-2000:]}")
    return int(r.stdout.split()[-1]) / 1024, time.perf_counter() - start


def _audio_seconds(out: Path) -> float:
    import soundfile
    return sum(soundfile.info(str(p)).duration for p in out.glob("*.flac"))


def bench_book(size: str = "0.6b", out_type: str = "q8_0", decoder_type: str = "f16", batch: int = 4,
               threads: int | None = None, runs: int = 1, model_path: str | None = None, frames_cap: int = 24,
               seed: int = 0, progress: bool = True, parts=("memory", "chapter", "resume")) -> dict:
    unknown = set(parts) - {"memory", "chapter", "resume"}
    if unknown or not parts:
        raise ValueError(f"--book takes memory, chapter and resume, comma-separated; got {','.join(parts)!r}")
    threads = threads or default_threads()
    path = model_path_for(model_path, size, decoder_type, progress, out_type)
    engine = Engine.load(path, threads=threads)
    speaker = engine.info.speakers[0].name
    result = {"stage": "book", "model": str(path), "size": engine.info.size_label, "type": engine.info.file_type,
              "threads": threads, "cores": available_cores(), "batch": batch, "frames_cap": frames_cap, "runs": runs}
    with tempfile.TemporaryDirectory(prefix="kazeia-bench-book-") as tmp:
        tmp = Path(tmp)
        if "memory" in parts:
            result["memory"] = _memory(tmp, path, engine, speaker, threads, batch, frames_cap, progress)
        if "chapter" in parts:
            result["chapter"] = _chapter(tmp, engine, speaker, batch, frames_cap, runs, progress)
        if "resume" in parts:
            result["resume"] = _resume(tmp, path, engine, speaker, threads, batch, frames_cap, seed)
    return result


def _memory(tmp: Path, path: Path, engine, speaker: str, threads: int, batch: int, cap: int, progress: bool) -> dict:
    """Peak RSS of `kazeia book` against the audio's length, and a straight line's slope through them."""
    books = []
    for units in UNITS:
        book = _write_book(tmp / f"book-{units}.md", units)
        out = tmp / f"out-{units}"
        if progress:
            print(f"  memory: a book of {2 * units} chapters", flush=True)
        peak, wall = _peak_rss(_book_command(path, book, out, speaker, threads, batch, cap))
        books.append({"chapters": 2 * units, "audio_s": round(_audio_seconds(out), 2), "peak_rss_mb": round(peak, 1),
                      "wall_s": round(wall, 2)})
    hours = [b["audio_s"] / 3600 for b in books]
    peaks = [b["peak_rss_mb"] for b in books]
    mean_h, mean_p = sum(hours) / len(hours), sum(peaks) / len(peaks)
    slope = (sum((h - mean_h) * (p - mean_p) for h, p in zip(hours, peaks))
             / max(1e-12, sum((h - mean_h) ** 2 for h in hours)))
    return {"books": books, "mb_per_audio_hour": round(slope, 1),
            "pcm_mb_per_audio_hour": round(engine.info.sample_rate * 4 * 3600 / 2 ** 20, 1)}


def _chapter(tmp: Path, engine, speaker: str, batch: int, cap: int, runs: int, progress: bool) -> dict:
    """One chapter (LONG_TEXT) with its chunks batched against one at a time, alternating, medians."""
    chapter_book = read_book(_write_book(tmp / "chapter.md", 1))
    request = Request("", speaker=speaker, sampling=SamplingParams.from_model(engine.info, max_frames=cap))
    rounds: dict[str, list[float]] = {"one_at_a_time": [], "batched": []}
    for r in range(runs):
        for kind, width in (("one_at_a_time", 1), ("batched", batch)):
            options = BookOptions(tmp / f"chapter-{kind}-{r}", formats=(), m4b=False, subtitles=(), loudness=None,
                                  request=request, batch=width, chapters=[1])
            plan = plan_book(chapter_book, engine, options)
            start = time.perf_counter()
            done = render_book(plan, engine)
            rounds[kind].append(time.perf_counter() - start)
            if progress:
                print(f"  chapter, {kind}: {rounds[kind][-1]:.1f} s for {done.seconds:.1f} s of audio", flush=True)
    seq, bat = median_low(rounds["one_at_a_time"]), median_low(rounds["batched"])
    return {"chunks": len(plan.chapters[0].jobs), "audio_s": round(done.seconds, 2), "one_at_a_time_s": round(seq, 2),
            "batched_s": round(bat, 2), "batched_speedup": round(seq / bat, 3), "rounds": rounds}


def _resume(tmp: Path, path: Path, engine, speaker: str, threads: int, batch: int, cap: int, seed: int) -> dict:
    """`kazeia book` killed (SIGKILL) after a random number of chunks (seeded), then the same command."""
    rng = random.Random(seed)
    book = _write_book(tmp / "resume.md", 1)
    out = tmp / "resume"
    request = Request("", speaker=speaker, sampling=SamplingParams.from_model(engine.info, max_frames=cap))
    total = sum(len(c.jobs) for c in plan_book(read_book(book), engine, BookOptions(out, request=request)).chapters)
    target = rng.randint(1, max(1, total - 2 * batch))
    command = _book_command(path, book, out, speaker, threads, batch, cap)
    journal = out / WORK / "chunks" / "journal.jsonl"
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and not (journal.exists() and len(journal.read_text().splitlines()) >= target):
        time.sleep(0.01)
    killed_after = time.perf_counter() - start
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = len(journal.read_text().splitlines()) if journal.exists() else 0
    subprocess.run(command, check=True, capture_output=True)
    chunk_s = _audio_seconds(out) / max(1, total)
    in_flight = min(2 * batch, total - kept)   # (queued on the batcher at the kill: their work is lost)
    return {"killed_after_s": round(killed_after, 2), "chunks": total, "kept": kept, "made_again": total - kept,
            "in_flight_at_most": in_flight, "audio_lost_at_most_s": round(in_flight * chunk_s, 2)}
