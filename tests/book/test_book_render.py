"""Books rendered on the demo model: each chapter the long take of its text bit for bit, loudness at
its target, an M4B whose chapter marks read back at the chapters' starts, subtitles on the chunks;
kill -9 then the same command gives the same bytes as one run; one chunk made again alone; a bad
book writes nothing; `say --text-file` resumes too and its memory does not grow with the text."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

from kazeia.engine import Engine, Request, SamplingParams, demo_model_path
from kazeia.engine.takes.loudness import LoudnessTarget
from kazeia.engine.book.render import WORK, BookOptions, plan_book, render_book
from kazeia.engine.book.source import BookError, read_book

from support.books import MARKDOWN_BOOK, make_epub, png_bytes
from support.commands import kazeia

pytestmark = pytest.mark.slow
RATE = 24000


@pytest.fixture(scope="module")
def engine():
    return Engine.load(demo_model_path(), threads=2)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_an_epub_becomes_chapters_subtitles_and_an_m4b(engine, tmp_path):
    import av
    import pyloudnorm
    from mutagen.mp4 import MP4
    book = read_book(make_epub(tmp_path / "b.epub"))
    voice = Request("", speaker="vivian", sampling=SamplingParams.from_model(engine.info, seed=5, max_frames=6))
    options = BookOptions(tmp_path / "out", formats=("wav", "flac"), request=voice,
                          loudness=LoudnessTarget(-20.0, -1.0, "book"))
    plan = plan_book(book, engine, options)
    result = render_book(plan, engine)
    assert not result.stopped and [c.number for c in plan.chapters] == [1, 2]
    sampling = SamplingParams.from_model(engine.info, max_frames=6)
    gain = np.float32(10 ** (result.gains_db[0] / 20))
    assert result.gains_db[0] == result.gains_db[1] and not result.notes   # one gain for the book
    starts, position, spoken = [], 0, []
    for planned, chapter in zip(plan.chapters, result.chapters):
        # the chapter's text as one long take
        take = engine.take(Request("", sampling=sampling, plan=planned.composition), batcher=engine.batcher(4))
        raw, _ = soundfile.read(chapter.path, dtype="float32")
        assert np.array_equal(raw, take.audio)
        stem = tmp_path / "out" / f"{planned.number:02d} - {planned.chapter.title}"
        final, rate = soundfile.read(stem.with_suffix(".wav"), dtype="float32")
        assert rate == RATE and np.array_equal(final, np.clip(take.audio * gain, -1, 1))
        flac, _ = soundfile.read(stem.with_suffix(".flac"), dtype="float32")
        assert np.abs(flac - final).max() < 2 ** -22
        spoken.append(final)
        # subtitles: a cue per chunk at its place in the take; a pause's silence lies between cues
        cues = [line for line in stem.with_suffix(".vtt").read_text().split("\n\n")[1:] if line.strip()]
        assert len(cues) == len(take.chunks)
        for cue, chunk in zip(cues, take.chunks):
            begin = cue.split(" --> ")[0]
            h, m, s = begin.split(":")
            assert abs((int(h) * 3600 + int(m) * 60 + float(s)) - chunk.span[0] / RATE) <= 0.0005
            assert " ".join(chunk.plan.written.split()).replace("&", "&amp;") in cue
        title_end, next_start = take.chunks[0].span[1], take.chunks[1].span[0]
        assert next_start - title_end >= RATE   # the pause after the title...
        assert not raw[title_end + 240:next_start - 240].any()   # ...is silence (but for the fades)
        assert "-->" in stem.with_suffix(".srt").read_text()
        starts.append(position)
        position += len(raw)
    book_audio = np.concatenate(spoken).astype(np.float64)
    assert abs(pyloudnorm.Meter(RATE).integrated_loudness(book_audio) - -20.0) < 0.5
    m4b = tmp_path / "out" / "The Test Book.m4b"
    with av.open(str(m4b)) as container:
        marks = container.chapters()
        assert [m["metadata"]["title"] for m in marks] == ["Chapter One", "Chapter Two"]
        assert [round(float(m["start"] * m["time_base"]), 3) for m in marks] == [round(s / RATE, 3) for s in starts]
        assert abs(container.duration / 1e6 - position / RATE) < 0.1
    tags = MP4(str(m4b))
    assert tags["\xa9nam"] == ["The Test Book"] and tags["\xa9ART"] == ["Ada Writer"] and tags["stik"] == [2]
    assert bytes(tags["covr"][0]) == png_bytes()
    assert [round(c.start, 3) for c in tags.chapters] == [round(s / RATE, 3) for s in starts]
    whole_book_cues = (tmp_path / "out" / "The Test Book.srt").read_text().count(" --> ")
    assert whole_book_cues == sum(len(c.jobs) for c in plan.chapters)


def test_per_chapter_loudness_and_the_ceiling(engine, tmp_path):
    import pyloudnorm
    path = tmp_path / "book.md"
    path.write_text(MARKDOWN_BOOK, encoding="utf-8")
    voice = Request("", speaker="ryan", sampling=SamplingParams.from_model(engine.info, max_frames=5))
    options = BookOptions(tmp_path / "out", formats=("wav",), m4b=False, subtitles=(), request=voice,
                          loudness=LoudnessTarget(-16.0, -12.0, "chapter"))
    plan = plan_book(read_book(path), engine, options)
    result = render_book(plan, engine)
    for planned, chapter, gain in zip(plan.chapters, result.chapters, result.gains_db):
        assert chapter.true_peak + gain <= -12.0 + 1e-6   # the ceiling holds...
        audio, _ = soundfile.read(next((tmp_path / "out").glob(f"{planned.number:02d} - *.wav")), dtype="float64")
        assert pyloudnorm.Meter(RATE).integrated_loudness(audio) == pytest.approx(chapter.loudness + gain, abs=0.05)
    assert any("ceiling" in note for note in result.notes)   # ...and says where it kept a chapter under -16


def _book(tmp_path: Path, sentences: int = 6) -> Path:
    path = tmp_path / "book.md"
    chapters = [f"## Part {k}\n\n" + " ".join(f"Sentence {i} of part {k} is here, said slowly and with care."
                                              for i in range(sentences)) for k in (1, 2)]
    path.write_text("# Kill Test\n\n" + "\n\n".join(chapters) + "\n", encoding="utf-8")
    return path


def _book_command(book: Path, out: Path, *extra) -> list[str]:
    return [sys.executable, "-m", "kazeia.engine", "book", str(book), "--model", "demo", "-o", str(out),
            "--speaker", "vivian", "--max-frames", "24", "--max-chars", "60", "--batch", "2", "--threads", "2",
            "--format", "flac", "--format", "mp3", *extra]


def test_kill_9_mid_chapter_then_the_same_command_gives_the_same_bytes(tmp_path):
    book = _book(tmp_path)
    whole = subprocess.run(_book_command(book, tmp_path / "whole"), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-2000:]
    out = tmp_path / "killed"
    proc = subprocess.Popen(_book_command(book, out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = out / WORK / "chunks" / "journal.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the render ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    kept = len(journal.read_text().splitlines())
    total = sum(1 for _ in (tmp_path / "whole" / WORK / "chunks").glob("*.wav"))
    assert 3 <= kept < total
    again = subprocess.run(_book_command(book, out), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"({kept} kept)" in again.stderr
    assert _files(out) == _files(tmp_path / "whole")   # every finished file, byte for byte
    assert not list(out.rglob(".*.partial.*"))


def test_one_chunk_made_again_leaves_the_rest(tmp_path):
    book = _book(tmp_path, sentences=4)
    out = tmp_path / "out"
    first = subprocess.run(_book_command(book, out, "--no-m4b"), capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    chapters = out / WORK / "chapters"
    before = {p.name: p.read_bytes() for p in chapters.glob("*.wav")}
    journal = out / WORK / "chunks" / "journal.jsonl"
    lines = len(journal.read_text().splitlines())
    redo = subprocess.run(_book_command(book, out, "--no-m4b", "--redo", "1:2:77"), capture_output=True, text=True,
                          timeout=600)
    assert redo.returncode == 0, redo.stderr[-2000:]
    assert len(journal.read_text().splitlines()) == lines + 1   # one chunk made, no other
    assert (chapters / "002.wav").read_bytes() == before["002.wav"]
    cues = json.loads((chapters / "001.json").read_text())["cues"]
    new = soundfile.read(chapters / "001.wav", dtype="float32")[0]
    was = soundfile.read(io.BytesIO(before["001.wav"]), dtype="float32")[0]
    redone = slice(cues[1]["start"], cues[1]["end"])
    assert not np.array_equal(new[redone], was[redone])
    fade = 120   # (5 ms: the crossfades at the redone chunk's edges)
    assert np.array_equal(new[:redone.start - fade], was[:redone.start - fade])   # the rest: as it was
    assert np.array_equal(new[redone.stop + fade:], was[redone.stop + fade:])


def test_a_bad_book_lists_every_problem_and_writes_nothing(tmp_path):
    path = tmp_path / "bad.md"
    path.write_text("# Bad\n\n## One\n\nFine words.\n\n## Two\n\n[pause:1s]\n\n## Three\n\n"
                    "Some words then [voice=nobody] more.\n", encoding="utf-8")
    r = kazeia("book", path, "--model", "demo", "-o", tmp_path / "out", "--speaker", "vivian")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "chapter 2 (Two)" in r.stderr and "markup but no words" in r.stderr
    assert "chapter 3 (Three), bad.md, line 13, column 24" in r.stderr and "unknown voice 'nobody'" in r.stderr
    assert not (tmp_path / "out").exists()
    with pytest.raises(BookError, match="no chapter 7"):
        plan_book(read_book(_book(tmp_path)), Engine.load(demo_model_path(), threads=1),
                  BookOptions(tmp_path / "x", chapters=[7]))
    r = kazeia("book", tmp_path / "missing.epub", "--list")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr


def _peak_rss_mb(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Peak resident memory of `kazeia ARGS` (a wrapper of its own, so no earlier child counts)."""
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "sys.stderr.write(r.stderr); sys.stdout.write(r.stdout); "
               "print('PEAK', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    r = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "kazeia.engine", *args],
                       capture_output=True, text=True, timeout=900)
    return int(r.stdout.rsplit("PEAK ", 1)[1]) / 1024, r


def test_say_text_file_memory_does_not_grow_with_the_text_and_it_resumes(tmp_path):
    def text(n: int) -> str:
        return " ".join(f"Sentence {i} of a long text." for i in range(n))
    peaks = []
    for n, name in ((100, "short"), (400, "long")):   # (12 frames a chunk: the long take is ~3 min of audio)
        (tmp_path / f"{name}.txt").write_text(text(n), encoding="utf-8")
        peak, r = _peak_rss_mb(["say", "--model", "demo", "--text-file", str(tmp_path / f"{name}.txt"), "--speaker",
                                "vivian", "--max-frames", "12", "--max-chars", "60", "--batch", "8", "--threads",
                                "2", "-o", str(tmp_path / f"{name}.wav")])
        assert r.returncode == 0, r.stderr[-2000:]
        peaks.append(peak)
    seconds = [soundfile.info(str(tmp_path / f"{n}.wav")).duration for n in ("short", "long")]
    assert seconds[1] > 3.5 * seconds[0]
    # holding the take adds its samples several times over (the writer before: 169 -> 250 MB here, 5x the
    # 15 MB of samples added); written as it is made, the peaks differ by the allocator's noise (1-7 MB
    # seen; 888 s of audio peaked at 156 MB)
    added_audio_mb = (seconds[1] - seconds[0]) * RATE * 4 / 2 ** 20
    assert peaks[1] - peaks[0] < 0.75 * added_audio_mb, (peaks, seconds)
    assert not list(tmp_path.glob(".*kazeia-chunks"))   # the work folder goes with a whole file
    # stopped by kill -9, the same command keeps the chunks made and writes the same file
    args = [sys.executable, "-m", "kazeia.engine", "say", "--model", "demo", "--text-file", str(tmp_path / "short.txt"),
            "--speaker", "vivian", "--max-frames", "12", "--max-chars", "60", "--batch", "8", "--threads", "2",
            "-o", str(tmp_path / "again.wav")]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = tmp_path / ".again.wav.kazeia-chunks" / "journal.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 4:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "resumed: " in r.stderr, r.stderr[-2000:]
    assert (tmp_path / "again.wav").read_bytes() == (tmp_path / "short.wav").read_bytes()


def test_bench_book_reports_a_kill_and_a_chapter(tmp_path):
    r = kazeia("bench", "--book", "resume,chapter", "--model", "demo", "--frames", "4", "--runs", "1",
               "--threads", "2", "--json", tmp_path / "book.json", env={"KAZEIA_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads((tmp_path / "book.json").read_text())
    resume, chapter = result["resume"], result["chapter"]
    assert 1 <= resume["kept"] < resume["chunks"] and resume["kept"] + resume["made_again"] == resume["chunks"]
    assert resume["in_flight_at_most"] <= 2 * result["batch"]
    assert chapter["chunks"] > 4 and chapter["batched_s"] > 0 and chapter["one_at_a_time_s"] > 0
    assert "kill -9 after" in r.stdout and "one chapter (" in r.stdout and result["machine"]
