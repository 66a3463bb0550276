"""Hostile books and text files (issue 57): zip and entity bombs, members that lie about their size,
damaged XML, text files with no end or in another encoding, work folders replaced by symlinks, and
titles that make file names too long or collide. Each gives one clear error (exit code 2 through the
command line, naming the file or part) in bounded memory and time, and writes nothing outside its
target; the command line is run as a user runs it, under an address-space limit where memory is the
point."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from support.books import make_epub

ADDRESS_SPACE = 1536 << 20   # 1.5 GiB: the bombs below inflate to 4 GiB and more if anything reads them


def kazeia_bounded(*args, cwd=None, timeout=60):
    """`kazeia ARGS...` in a new process whose address space is capped at ADDRESS_SPACE."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    return subprocess.run([sys.executable, "-m", "kazeia.engine", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit, cwd=cwd)


def one_clear_line(result, *words):
    """Exit code 2, no traceback, and the last line of stderr naming each of `words`."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    for word in words:
        assert word in result.stderr, result.stderr
    return result.stderr


@pytest.fixture(scope="module")
def base_epub(tmp_path_factory) -> Path:
    return make_epub(tmp_path_factory.mktemp("books") / "base.epub")


def rewritten(base: Path, out: Path, replace: dict | None = None, add: dict | None = None) -> Path:
    """`base` with some parts replaced and others added (each deflated)."""
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            dst.writestr(item.filename, (replace or {}).get(item.filename, src.read(item.filename)))
        for name, data in (add or {}).items():
            dst.writestr(name, data)
    return out


def billion_laughs(root: str, inner: str) -> bytes:
    """An XML document whose entity &lol9; expands to 10**9 'lol's (3 GB), used inside `root`."""
    entities = '<!ENTITY lol "lol">' + "".join(
        f'<!ENTITY lol{i} "{(f"&lol{i - 1};" if i > 1 else "&lol;") * 10}">' for i in range(1, 10))
    return f'<?xml version="1.0" encoding="utf-8"?><!DOCTYPE {root} [{entities}]>{inner}'.encode()


# -- zip bombs ----------------------------------------------------------------------------------------
def with_bombs(base: Path, out: Path, bombs: dict[str, int], claimed: int | None = None) -> Path:
    """`base` with parts of `bombs[name]` MiB of zeros each (a part of `base` of that name left out),
    deflated by hand: a MiB of zeros deflates to ~1 KB, so GiBs take milliseconds to make. `claimed`:
    the size the zip's directory records instead of the true one (the CRC is never right: whatever
    checks it has already inflated the part)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)   # (the same bytes for every MiB)
    end = c.flush()
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename not in bombs:
                dst.writestr(item.filename, src.read(item.filename))
        for name, mib in bombs.items():
            raw = block * mib + end
            info = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
            info.compress_type, info.CRC = zipfile.ZIP_DEFLATED, 0
            info.file_size, info.compress_size = (mib << 20) if claimed is None else claimed, len(raw)
            info.header_offset = dst.fp.tell()
            dst.fp.write(info.FileHeader(zip64=False))
            dst.fp.write(raw)
            dst.start_dir = dst.fp.tell()
            dst.filelist.append(info)
            dst.NameToInfo[name] = info
            dst._didModify = True
    return out


def test_a_part_that_inflates_past_its_limit_is_refused_before_inflating(base_epub, tmp_path):
    from kazeia.engine.book.source import MAX_EPUB_TEXT_MEMBER_BYTES
    bomb = with_bombs(base_epub, tmp_path / "bomb.epub", {"EPUB/c1.xhtml": 3584})   # 3.5 GiB of "chapter"
    assert bomb.stat().st_size < 8 << 20
    start = time.perf_counter()
    err = one_clear_line(kazeia_bounded("book", bomb, "--list"), "EPUB/c1.xhtml", "inflated",
                         f"{MAX_EPUB_TEXT_MEMBER_BYTES:,}")
    assert time.perf_counter() - start < 20
    assert "MemoryError" not in err


def test_a_book_over_its_total_budget_is_refused_before_inflating(base_epub, tmp_path):
    from kazeia.engine.book.source import MAX_EPUB_BYTES, MAX_EPUB_MEMBER_BYTES
    parts = {f"EPUB/image{k}.png": 250 for k in range(5)}   # each under its own limit, 1.2 GiB in all
    assert 250 << 20 <= MAX_EPUB_MEMBER_BYTES
    book = with_bombs(base_epub, tmp_path / "many.epub", parts)
    err = one_clear_line(kazeia_bounded("book", book, "--list"), "inflated in all", f"{MAX_EPUB_BYTES:,}")
    assert "image0.png" not in err


def test_a_part_that_claims_less_than_it_inflates_stops_at_its_claim(base_epub, tmp_path):
    """zipfile cuts a part at the size the directory records, but only after inflating up to 2 GiB in
    one step: every part is inflated once a MiB at a time and its CRC checked before ebooklib reads it."""
    liar = with_bombs(base_epub, tmp_path / "liar.epub", {"EPUB/c1.xhtml": 3584}, claimed=2000)
    assert zipfile.ZipFile(liar).getinfo("EPUB/c1.xhtml").file_size == 2000
    err = one_clear_line(kazeia_bounded("book", liar, "--list"), "EPUB/c1.xhtml", "damaged", "CRC")
    assert "MemoryError" not in err


# -- XML ----------------------------------------------------------------------------------------------
def test_an_entity_bomb_in_encryption_xml_is_a_clear_error(base_epub, tmp_path):
    inner = '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><x>&lol9;</x></encryption>'
    book = rewritten(base_epub, tmp_path / "laughs.epub",
                     add={"META-INF/encryption.xml": billion_laughs("encryption", inner)})
    one_clear_line(kazeia_bounded("book", book, "--list"), "META-INF/encryption.xml", "damaged XML")


def test_a_damaged_encryption_xml_is_a_clear_error(base_epub, tmp_path):
    book = rewritten(base_epub, tmp_path / "damaged.epub", add={"META-INF/encryption.xml": b"<encryption><x>"})
    one_clear_line(kazeia_bounded("book", book, "--list"), "META-INF/encryption.xml", "damaged XML")


def test_entity_bombs_in_a_chapter_and_the_package_expand_nothing(base_epub, tmp_path):
    c1 = zipfile.ZipFile(base_epub).read("EPUB/c1.xhtml").decode()
    body = c1[c1.index("<html"):].replace("It was a bright day.", "It was &lol9; day.")
    chapter = rewritten(base_epub, tmp_path / "chapter.epub",
                        replace={"EPUB/c1.xhtml": billion_laughs("html", body)})
    listed = kazeia_bounded("book", chapter, "--list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "lollol" not in listed.stdout
    opf = zipfile.ZipFile(base_epub).read("EPUB/content.opf").decode()
    package = opf[opf.index("<package"):].replace("The Test Book", "&lol9;")
    book = rewritten(base_epub, tmp_path / "package.epub",
                     replace={"EPUB/content.opf": billion_laughs("package", package)})
    result = kazeia_bounded("book", book, "--list")
    assert result.returncode in (0, 2) and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "lollol" not in result.stdout


# -- text files ---------------------------------------------------------------------------------------
def sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def test_say_refuses_a_text_file_with_no_end(tmp_path):
    out = tmp_path / "out.wav"
    err = one_clear_line(kazeia_bounded("say", "--model", "demo", "--text-file", "/dev/zero", "-o", out),
                         "--text-file /dev/zero", "not a regular file")
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_say_refuses_a_text_file_over_the_limit_before_reading_it(tmp_path):
    from kazeia.engine.text.limits import MAX_TEXT_FILE_BYTES
    huge = sparse(tmp_path / "huge.txt", 2 * MAX_TEXT_FILE_BYTES)
    out = tmp_path / "out.wav"
    err = one_clear_line(kazeia_bounded("say", "--model", "demo", "--text-file", huge, "-o", out),
                         str(huge), "over the limit")
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_say_names_the_byte_where_a_text_file_stops_being_utf8(tmp_path):
    latin = tmp_path / "latin.txt"
    latin.write_bytes("Déjà vu.".encode("latin-1"))
    one_clear_line(kazeia_bounded("say", "--model", "demo", "--text-file", latin, "-o", tmp_path / "o.wav"),
                   str(latin), "not UTF-8 text (byte 1)")


@pytest.mark.parametrize("suffix", [".txt", ".md"])
def test_a_text_book_over_the_limit_or_not_utf8_is_refused(tmp_path, suffix):
    from kazeia.engine.book.source import BookError, read_book
    from kazeia.engine.text.limits import MAX_TEXT_FILE_BYTES
    with pytest.raises(BookError, match="over the limit"):
        read_book(sparse(tmp_path / f"huge{suffix}", MAX_TEXT_FILE_BYTES + 1))
    bad = tmp_path / f"latin{suffix}"
    bad.write_bytes(b"# Chapter\n\ncaf\xe9")
    with pytest.raises(BookError, match=r"latin\S*: 1 problem\(s\):\n  not UTF-8 text \(byte 14\)"):
        read_book(bad)
    fifo = tmp_path / f"fifo{suffix}"
    os.mkfifo(fifo)
    with pytest.raises(BookError, match="not a file"):   # (never opened: a FIFO would block)
        read_book(fifo)


def test_scripts_and_lexicons_are_read_to_a_size(tmp_path):
    from kazeia.engine.script.lines import ScriptError, read_script
    from kazeia.engine.text.lexicon import LexiconError, load_lexicons
    from kazeia.engine.text.limits import MAX_LEXICON_FILE_BYTES, MAX_TEXT_FILE_BYTES
    with pytest.raises(ScriptError, match="over the limit"):
        read_script(sparse(tmp_path / "huge.csv", MAX_TEXT_FILE_BYTES + 1))
    with pytest.raises(LexiconError, match="over the limit"):
        load_lexicons([sparse(tmp_path / "huge.toml", MAX_LEXICON_FILE_BYTES + 1)])
    nested = tmp_path / "nested.jsonl"
    nested.write_text('{"id": "a", "text": "fine"}\n' + "[" * 100_000 + "\n" + '{"id": "b", "n": ' + "9" * 5000 + "}\n")
    with pytest.raises(ScriptError) as raised:
        read_script(nested)
    assert [(n, "nested deeper" in why or "digits" in why) for n, _, why in raised.value.problems] == [
        (2, True), (3, True)]


def test_toml_files_nested_without_end_are_a_clear_error(tmp_path):
    """(tomllib recurses once per bracket: a lexicon or a cast of `a = [[[[...` was a RecursionError)"""
    from kazeia.engine.voices.cast import MAX_CAST_BYTES, load_cast
    from kazeia.engine.text.lexicon import LexiconError, load_lexicons
    nested = tmp_path / "nested.toml"
    nested.write_text("a = " + "[" * 50_000)
    with pytest.raises(LexiconError, match="nested too deeply"):
        load_lexicons([nested])
    with pytest.raises(ValueError, match="cast .*nested.toml: nested too deeply"):
        load_cast(nested, None)
    with pytest.raises(ValueError, match="cast .*huge.toml: .*over the limit"):
        load_cast(sparse(tmp_path / "huge.toml", MAX_CAST_BYTES + 1), None)


# -- work folders and names ---------------------------------------------------------------------------
def test_say_refuses_a_work_folder_that_is_a_symlink(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "take.wav"
    (tmp_path / f".{out.name}.kazeia-chunks").symlink_to(outside)
    text = tmp_path / "text.txt"
    text.write_text("One sentence here. Another sentence there. A third one to close.")
    err = one_clear_line(kazeia_bounded("say", "--model", "demo", "--speaker", "ryan", "--text-file", text, "-o", out,
                                        "--max-chars", "8", "--max-frames", "3"), "kazeia-chunks", "symbolic link")
    assert "refused" in err
    assert list(outside.iterdir()) == [] and not out.exists()


def test_a_book_refuses_a_work_folder_that_is_a_symlink(base_epub, tmp_path):
    outside, out = tmp_path / "outside", tmp_path / "out"
    outside.mkdir()
    out.mkdir()
    (out / ".kazeia-book").symlink_to(outside)
    result = kazeia_bounded("book", base_epub, "--model", "demo", "--speaker", "ryan", "-o", out, "--max-frames", "3",
                            "--no-m4b")
    one_clear_line(result, ".kazeia-book", "symbolic link")
    assert list(outside.iterdir()) == []
    assert [p.name for p in out.iterdir()] == [".kazeia-book"]


def test_long_cjk_titles_make_names_that_fit_with_their_temporary_name(tmp_path):
    from kazeia.engine.atomic import atomic_write_text
    from kazeia.engine.book.export import book_name, chapter_path
    title = "語" * 300
    for path in [chapter_path(tmp_path, 1234, title, "flac", 4), tmp_path / f"{book_name(title)}.m4b"]:
        assert len(path.name.encode()) <= 255 - 60
        atomic_write_text(path, "written")   # (through its temporary name, as every file of a book is)
        assert path.read_text() == "written"


@pytest.mark.parametrize("title", ["01 - Chapter One", "1", "2024", "Chapter One"])
def test_the_books_own_files_are_never_named_as_a_chapters(title):
    from kazeia.engine.book.export import book_name, output_name
    chapters = {output_name(n, t, w) for n in range(1, 200) for w in (2, 3) for t in ("Chapter One", title, "")}
    assert book_name(title) not in chapters


@pytest.mark.slow
def test_a_book_titled_as_its_first_chapter_keeps_both_subtitles(tmp_path):
    from kazeia.engine.book.source import read_book
    book = make_epub(tmp_path / "book.epub")
    # the book's title made its first chapter's file name: "01 - Chapter One"
    data = zipfile.ZipFile(book).read("EPUB/content.opf").replace(b"The Test Book", b"01 - Chapter One")
    named = rewritten(book, tmp_path / "named.epub", replace={"EPUB/content.opf": data})
    assert read_book(named).title == "01 - Chapter One"
    out = tmp_path / "out"
    result = kazeia_bounded("book", named, "--model", "demo", "--speaker", "ryan", "-o", out, "--max-frames", "3",
                            "--format", "wav",
                            "--subtitles", "srt", timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    chapter, whole = out / "01 - Chapter One.srt", out / "Book 01 - Chapter One.srt"
    assert chapter.exists() and whole.exists() and (out / "Book 01 - Chapter One.m4b").exists()
    assert chapter.read_text() != whole.read_text()   # (the book's cues run through both chapters)
