"""Books read into chapters: EPUB (front matter, notes, cover, metadata), Markdown (front matter block,
a title over chapters, what is not read), plain text (chapter headings); bad books named with every
problem; the streamed loudness meter against pyloudnorm; subtitles' cues."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia.engine.long_take.assemble import Cue
from kazeia.engine.takes.loudness import LoudnessMeter, LoudnessTarget, TruePeak, gain_db, integrated_loudness
from kazeia.engine.book.source import BookError, read_book
from kazeia.engine.long_take.subtitles import subtitles

from support.books import MARKDOWN_BOOK, make_epub, png_bytes, with_drm


def test_an_epub_reads_its_chapters_and_skips_what_a_listener_skips(tmp_path):
    book = read_book(make_epub(tmp_path / "b.epub"))
    assert (book.title, book.author, book.language) == ("The Test Book", "Ada Writer", "en")
    assert book.cover == png_bytes() and book.cover_type == "image/png"
    read = book.read_chapters
    assert [c.title for c in read] == ["Chapter One", "Chapter Two"]
    skipped = {c.kind: c.skip_reason for c in book.chapters if not c.read}
    assert "titlepage" in skipped and "toc" in skipped   # the title page and the nav document
    one = read[0].text
    assert one.startswith("Chapter One\n\nIt was a bright day. The end came soon.\n\n")
    assert "footnote" not in one and "day.1" not in one and "emphasis." in one
    assert read[0].lines[0] > 0 and read[0].where(3, 5).startswith("c1.xhtml, line ")
    noted = read_book(tmp_path / "b.epub", notes="read").read_chapters[0].text
    assert "A footnote nobody hears." in noted and "day.1 The end" in noted


def test_epub_text_is_escaped_where_it_looks_like_markup(tmp_path):
    path = make_epub(tmp_path / "b.epub", [("Odd", "<h1>Odd</h1><p>A [bracket] and a back\\slash.</p>")])
    assert "A \\[bracket\\] and a back\\\\slash." in read_book(path).read_chapters[0].text


def test_markdown_chapters_title_and_front_matter(tmp_path):
    path = tmp_path / "book.md"
    path.write_text(MARKDOWN_BOOK, encoding="utf-8")
    book = read_book(path)
    assert (book.title, book.author) == ("A Markdown Book", "Sam Author")
    assert [c.title for c in book.read_chapters] == ["The Start", "The End"]
    front = book.chapters[0]
    assert not front.read and front.text == "A foreword nobody asked for." and front.lines == [8]
    start = book.read_chapters[0]
    assert start.text == ("The Start\n\nIt begins here, with a link and code.\n"
                          "A second line [pause:300ms] of the same paragraph.")
    assert start.lines == [10, 12, 12, 13]
    assert read_book(path, front_matter=True).chapters[0].read


def test_plain_text_chapters_at_heading_lines(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("A Title\n\nCHAPTER I\n\nFirst words.\n\nChapter 2: Onward\n\nMore words.\n"
                    "The chapter continues here.\n\nEpilogue\n\nDone.\n", encoding="utf-8")
    book = read_book(path)
    assert [c.title for c in book.read_chapters] == ["CHAPTER I", "Chapter 2: Onward", "Epilogue"]
    assert book.read_chapters[1].lines == [7, 8, 9, 10]
    assert not book.chapters[0].read   # "A Title": before the first heading
    flat = tmp_path / "flat.txt"
    flat.write_text("No headings at all.\nJust text.\n", encoding="utf-8")
    assert [c.title for c in read_book(flat).chapters] == ["flat"]


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("not a zip"), "not an EPUB (not a zip archive)"),
    (lambda p: with_drm(make_epub(p.with_name("plain.epub")), p), "DRM-protected"),
    (lambda p: make_epub(p, [("Empty", "<h1></h1><p> </p>")]), "no chapter has words to read"),
    (lambda p: p.write_bytes(b"PK\x03\x04broken"), "not an EPUB"),
])
def test_bad_epubs_are_named(tmp_path, make, message):
    path = tmp_path / "bad.epub"
    make(path)
    with pytest.raises(BookError) as e:
        read_book(path)
    assert message in str(e.value) and "bad.epub" in str(e.value)


def test_other_bad_books(tmp_path):
    for name, content, message in [("a.pdf", b"%PDF", "unknown book format .pdf"),
                                   ("b.md", b"\xff\xfe\x00bad", "not UTF-8"),
                                   ("c.md", b"# Only\n\n```\ncode\n```\n", None)]:
        path = tmp_path / name
        path.write_bytes(content)
        if message is None:   # a heading and code: the heading is the chapter's one word
            assert read_book(path).read_chapters[0].text == "Only"
            continue
        with pytest.raises(BookError, match=message):
            read_book(path)
    with pytest.raises(BookError, match="no such file"):
        read_book(tmp_path / "missing.epub")


def test_streamed_loudness_equals_pyloudnorm_on_the_whole_array():
    import pyloudnorm
    from scipy import signal
    rng = np.random.default_rng(0)
    rate = 24000
    envelope = np.repeat(rng.uniform(0.0005, 0.4, 60), rate // 5)   # speech-like level changes, silences
    x = (rng.standard_normal(len(envelope)) * envelope).astype(np.float32)
    meter = LoudnessMeter(rate)
    for start in range(0, len(x), 7777):   # blocks of no particular size
        meter.add(x[start:start + 7777])
    whole = pyloudnorm.Meter(rate).integrated_loudness(x.astype(np.float64))
    assert abs(meter.integrated() - whole) < 0.01
    peak = 20 * np.log10(np.abs(signal.resample_poly(x.astype(np.float64), 4, 1)).max())
    assert meter.true_peak == pytest.approx(peak, abs=1e-9)
    tp, y = TruePeak(), x[:3000] * np.hanning(3000).astype(np.float32)
    for start in range(0, len(y), 10):   # blocks shorter than the filter's context
        tp.add(y[start:start + 10])
    assert tp.dbtp == pytest.approx(20 * np.log10(np.abs(signal.resample_poly(y.astype(np.float64), 4, 1)).max()),
                                    abs=1e-9)
    # chapters measured apart, gated together: the book's loudness lies between theirs
    a, b = LoudnessMeter(rate), LoudnessMeter(rate)
    a.add(x[:len(x) // 2])
    b.add(0.25 * x[len(x) // 2:])
    both = integrated_loudness([a.hops, b.hops])
    assert b.integrated() < both < a.integrated()
    assert integrated_loudness([np.zeros(10)]) == -np.inf and integrated_loudness([np.ones(3)]) == -np.inf


def test_gain_meets_the_target_under_the_true_peak_ceiling():
    target = LoudnessTarget(-20.0, -3.0)
    assert gain_db(-26.0, -12.0, target) == (6.0, "")
    gain, note = gain_db(-26.0, -5.0, target)   # +6 dB would put the peak at +1 dBTP
    assert gain == pytest.approx(2.0) and "ceiling" in note
    assert gain_db(float("-inf"), float("-inf"), target)[0] == 0.0
    with pytest.raises(ValueError, match="per 'book' or per 'chapter'"):
        LoudnessTarget(per="sentence").validate()


def test_subtitles_one_cue_per_chunk_with_pauses_between():
    cues = [Cue(0, 24000, "First <chunk> & more.", 0), Cue(23880, 48000, "Crossfaded into the second.", 1),
            Cue(60000, 60000, "", 2), Cue(72000, 96000 + 12, "After a pause, a long chunk of words that wraps.", 3)]
    vtt = subtitles(cues, 24000, "vtt")
    assert vtt.startswith("WEBVTT")
    assert "00:00:00.000 --> 00:00:00.995\nFirst &lt;chunk&gt; &amp; more." in vtt   # ends where the next starts
    assert "00:00:03.000 --> 00:00:04.000\nAfter a pause, a long chunk of words that\nwraps." in vtt
    srt = subtitles(cues, 24000, "srt")
    assert srt.startswith("1\n00:00:00,000 --> 00:00:00,995\nFirst \u2039chunk\u203a & more.")
    assert srt.count(" --> ") == 3   # the empty chunk has no cue
