"""A book's finished files from its assembled chapters (float32 WAV in the work folder), read and
written block by block, each scaled by its one gain: chapter files (WAV, FLAC, MP3, Opus: libsndfile)
and one M4B (AAC in MP4: PyAV) with a chapter mark per chapter, its title, author and cover (the
tags: mutagen). Every file is written beside its name and renamed when whole."""
from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterator

import numpy as np
import soundfile

from ..atomic import atomic_path
from ..untrusted import name_bytes
from ..audio_io import reproducible

BLOCK = 1 << 16   # samples read and written at a time (~2.7 s at 24 kHz)
# chapter formats: suffix, libsndfile's container and sample type
CHAPTER_FORMATS = {"wav": (".wav", "WAV", "FLOAT"), "wav16": (".wav", "WAV", "PCM_16"), "flac": (".flac", "FLAC", "PCM_24"),
                   "mp3": (".mp3", "MP3", "MPEG_LAYER_III"), "opus": (".opus", "OGG", "OPUS")}
M4B_BITRATE = 64_000   # AAC, mono speech


@dataclass
class ExportChapter:
    title: str
    raw: Path              # the assembled chapter (float32 WAV)
    gain_db: float         # applied to every sample


def _blocks(path: Path, gain_db: float) -> Iterator[np.ndarray]:
    gain = np.float32(10 ** (gain_db / 20))
    with soundfile.SoundFile(str(path)) as f:
        while True:
            block = f.read(BLOCK, dtype="float32", always_2d=False)
            if not len(block):
                return
            yield block * gain


def write_chapter(chapter: ExportChapter, out: Path, fmt: str) -> Path:
    """One chapter's file in `fmt` (CHAPTER_FORMATS), its gain applied."""
    _, container, subtype = CHAPTER_FORMATS[fmt]
    rate = soundfile.info(str(chapter.raw)).samplerate
    with atomic_path(out) as partial:
        with soundfile.SoundFile(str(partial), "w", rate, 1, format=container, subtype=subtype) as f:
            reproducible(f)
            f.title = chapter.title[:200]
            for block in _blocks(chapter.raw, chapter.gain_db):
                f.write(np.clip(block, -1.0, 1.0))
    return out


def _encode_m4b(chapters: list[ExportChapter], path: Path, rate: int) -> list[tuple[int, int]]:
    """Chapters one after another into one AAC stream in MP4 (PyAV), a chapter mark each; returns
    each chapter's [start, end) in samples."""
    import av
    spans, at = [], 0
    for chapter in chapters:
        n = soundfile.info(str(chapter.raw)).frames
        spans.append((at, at + n))
        at += n
    # (bitexact: no encoder version or random ids in the file, so a resumed run writes the same bytes)
    with av.open(str(path), "w", format="ipod", options={"fflags": "+bitexact"}) as container:
        stream = container.add_stream("aac", rate=rate, layout="mono", options={"flags": "+bitexact"})
        stream.bit_rate = M4B_BITRATE
        # (before the first packet: the MP4 muxer plans its chapter track in the header)
        container.set_chapters([{"id": k + 1, "start": s, "end": e, "time_base": Fraction(1, rate),
                                 "metadata": {"title": c.title}} for k, (c, (s, e)) in enumerate(zip(chapters, spans))])
        pts = 0
        for chapter in chapters:
            for block in _blocks(chapter.raw, chapter.gain_db):
                frame = av.AudioFrame.from_ndarray(np.clip(block, -1.0, 1.0)[None, :], format="flt", layout="mono")
                frame.sample_rate, frame.pts, frame.time_base = rate, pts, Fraction(1, rate)
                pts += len(block)
                container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return spans


def write_m4b(chapters: list[ExportChapter], out: Path, title: str, author: str = "", cover: bytes | None = None,
              cover_type: str = "", language: str = "") -> list[tuple[int, int]]:
    """The whole book as one M4B (AAC, a chapter mark per chapter, tagged as an audiobook)."""
    from mutagen.mp4 import MP4, MP4Cover
    rate = soundfile.info(str(chapters[0].raw)).samplerate
    with atomic_path(out) as partial:
        spans = _encode_m4b(chapters, partial, rate)
        tags = MP4(str(partial))
        tags["\xa9nam"], tags["\xa9alb"], tags["\xa9gen"] = [title], [title], ["Audiobook"]
        tags["stik"] = [2]   # media kind: audiobook
        if author:
            tags["\xa9ART"] = [author]
        if cover:
            kind = MP4Cover.FORMAT_PNG if cover_type == "image/png" else MP4Cover.FORMAT_JPEG
            tags["covr"] = [MP4Cover(cover, imageformat=kind)]
        tags.save()
    return spans


# A title's part of a file name, in UTF-8 bytes: file systems cap a name at 255 bytes, and the name
# also holds a chapter's number (" - "), its extension and, while it is written, atomic.py's temporary
# prefix and suffix (".{name}.{pid}-{thread}.partial": up to ~45 bytes). 72 CJK letters are 216 bytes.
MAX_TITLE_BYTES = 150


def safe_name(title: str) -> str:
    """A title as a file name: without characters file systems refuse, at most 80 characters and
    MAX_TITLE_BYTES bytes (cut at a character)."""
    name = "".join(ch if ch.isalnum() or ch in " -_.,'()" else "_" for ch in title).strip(" ._")[:80]
    return name_bytes(name, MAX_TITLE_BYTES).strip(" ._")


def book_name(title: str) -> str:
    """The book's own files' name (its M4B and the M4B's subtitles): never one a chapter's file could
    have (chapters' names begin with their number, so a title such as "01 - One" becomes "Book 01 - One")."""
    name = safe_name(title) or "book"
    return f"Book {name}" if name[0].isdigit() else name


def output_name(index: int, title: str, width: int = 2) -> str:
    """A chapter's file name: its number and title."""
    safe = safe_name(title)
    return f"{index:0{width}d} - {safe}" if safe else f"{index:0{width}d}"


def chapter_path(folder: Path, index: int, title: str, fmt: str, width: int = 2) -> Path:
    return Path(folder) / (output_name(index, title, width) + CHAPTER_FORMATS[fmt][0])


def remove_partials(folder: str | os.PathLike) -> None:
    for stale in Path(folder).glob(".*.partial.*"):
        stale.unlink(missing_ok=True)
