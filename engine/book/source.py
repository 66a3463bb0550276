"""A book read into chapters of speakable text: EPUB (ebooklib, its HTML read with lxml), Markdown
(markdown-it-py) and plain text. Each chapter keeps, per line of its text, the line of the source it
came from, so a markup error names the chapter, the file's line and the column.

What is read and what is skipped, as a listener expects by default (both configurable):
- EPUB: the spine in order; parts the book marks (`epub:type`) as cover, title page, copyright page,
  table of contents, index, colophon and the like are skipped, as are non-linear spine items and
  parts with no text; a dedication, preface or epilogue is read. Footnotes and endnotes are skipped
  and so are their reference marks in the text (a "1" read mid-sentence); `notes="read"` keeps both.
- Markdown: a chapter begins at each heading of the highest level the file uses (`#`, or `##` when it
  has no `#`); text before the first heading is front matter. Code blocks, HTML and images are not read.
- Plain text: a chapter begins at a line of its own that names one ("Chapter 3", "CHAPTER IV", "Part
  Two", "Prologue", "Epilogue", "第三章"); without such lines the text is one chapter.

Text taken from EPUB's HTML has its brackets escaped (it carries no Kazeia markup); Markdown and plain
text keep Kazeia's markup ([pause:1s], [voice=...], checked when the chapter is planned)."""
from __future__ import annotations

import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

SKIPPED_KINDS = frozenset({"cover", "titlepage", "halftitlepage", "copyright-page", "toc", "landmarks", "loi",
                           "lot", "index", "colophon", "imprint", "frontispiece", "bibliography", "errata",
                           "seriespage", "other-credits", "imprimatur", "page-list"})
NOTE_KINDS = frozenset({"footnote", "footnotes", "endnote", "endnotes", "rearnote", "rearnotes", "note"})
TEXT_SUFFIXES = (".txt", ".text")
MARKDOWN_SUFFIXES = (".md", ".markdown")

# What an EPUB may hold, checked in its zip directory before anything is inflated (docs/security.md).
# ebooklib reads every part whole into memory; Python's zipfile never inflates a member past the size
# the directory records (one that claims less fails its CRC), so these bound the memory a book takes.
MAX_EPUB_TEXT_MEMBER_BYTES = 64 << 20    # one XHTML, OPF, NCX or XML part (a long novel's chapter: < 2 MiB)
MAX_EPUB_MEMBER_BYTES = 256 << 20        # one image, font or audio part
MAX_EPUB_BYTES = 1 << 30                 # every part inflated, together (overlapping members count each time)
MAX_EPUB_MEMBERS = 20_000
EPUB_TEXT_SUFFIXES = (".xhtml", ".html", ".htm", ".xml", ".opf", ".ncx", ".css", ".svg", ".smil", ".txt")


class BookError(ValueError):
    """What makes a book unreadable, all of it at once: [(where, why)]."""

    def __init__(self, path: Path, problems: list[tuple[str, str]]):
        self.path, self.problems = Path(path), problems
        shown = "\n".join(f"  {where}: {why}" if where else f"  {why}" for where, why in problems[:50])
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        super().__init__(f"{path}: {len(problems)} problem(s):\n{shown}{more}")


@dataclass
class Chapter:
    title: str
    text: str                    # what is spoken: its title, then its paragraphs (blank lines between)
    source: str                  # where it came from: the EPUB part's file name, or the book's file name
    lines: list[int]             # per line of `text`, the line of `source` it came from (1-based; 0: unknown)
    kind: str = "chapter"        # the EPUB's epub:type, or "chapter" / "front matter"
    read: bool = True            # False: skipped (why in `skip_reason`)
    skip_reason: str = ""

    @property
    def words(self) -> int:
        return len(self.text.split())

    def where(self, line: int, column: int | None = None) -> str:
        """A chapter text's line (and column) as the user finds it in the book's file."""
        source_line = self.lines[line - 1] if 0 < line <= len(self.lines) else 0
        at = f"{self.source}, line {source_line}" if source_line else f"{self.source}"
        return at + (f", column {column}" if column is not None else "")


@dataclass
class Book:
    path: Path
    title: str
    author: str = ""
    language: str = ""               # the book's own (EPUB dc:language), "" when not given
    cover: bytes | None = None       # image bytes (EPUB), for the M4B's artwork
    cover_type: str = ""             # its media type
    chapters: list[Chapter] = field(default_factory=list)

    @property
    def read_chapters(self) -> list[Chapter]:
        return [c for c in self.chapters if c.read]


def read_book(path: str | Path, notes: str = "skip", skip_kinds=SKIPPED_KINDS, front_matter: bool = False) -> Book:
    """The book at `path` by its suffix (.epub, .md/.markdown, .txt); raises BookError listing every
    problem that stops it (an unreadable file, DRM, no chapter with words). `notes`: "skip" or "read";
    `front_matter`: read Markdown's and plain text's text before the first chapter heading."""
    path = Path(path)
    if notes not in ("skip", "read"):
        raise ValueError(f"notes must be 'skip' or 'read', got {notes!r}")
    suffix = path.suffix.lower()
    if not path.is_file():
        raise BookError(path, [("", "no such file" if not path.exists() else "not a file")])
    if suffix == ".epub":
        book = _read_epub(path, notes, frozenset(skip_kinds))
    elif suffix in MARKDOWN_SUFFIXES or suffix in TEXT_SUFFIXES:
        from ..text.limits import MAX_TEXT_FILE_BYTES
        from ..untrusted import InputError, read_text
        try:
            text = read_text(path, MAX_TEXT_FILE_BYTES)
        except InputError as e:
            raise BookError(path, [("", str(e).removeprefix(f"{path}: "))]) from None
        except OSError as e:
            raise BookError(path, [("", f"cannot read it ({e.strerror})")]) from None
        if suffix in MARKDOWN_SUFFIXES:
            book = _read_markdown(path, text, front_matter)
        else:
            book = _read_text(path, text, front_matter)
    else:
        raise BookError(path, [("", f"unknown book format {path.suffix or '(none)'}: use .epub, .md or .txt")])
    if not book.read_chapters:
        raise BookError(path, [("", "no chapter has words to read" + (
            " (every part with text is marked as skipped: " + ", ".join(sorted({c.kind for c in book.chapters})) + ")"
            if book.chapters else ""))])
    return book


# -- plain text -------------------------------------------------------------------------------------
_HEADING = re.compile(r"^\s*((chapter|part|book)\s+([0-9]+|[ivxlcdm]+|[a-z]+(-[a-z]+)?)\b.*|prologue|epilogue|"
                      r"preface|foreword|introduction|afterword|第[0-9一二三四五六七八九十百千零〇]+[章节回部])\s*[.:]?\s*$",
                      re.IGNORECASE)


def _is_heading(lines: list[str], i: int) -> bool:
    line = lines[i]
    return (len(line) <= 80 and bool(_HEADING.match(line))
            and (i == 0 or not lines[i - 1].strip()))


def _read_text(path: Path, text: str, front_matter: bool) -> Book:
    lines = text.splitlines()
    starts = [i for i in range(len(lines)) if _is_heading(lines, i)]
    chapters = []
    if not starts:
        chapters.append(_chapter(path.stem, path.name, [(n + 1, s) for n, s in enumerate(lines)]))
    else:
        if any(s.strip() for s in lines[:starts[0]]):
            front = _chapter("Front matter", path.name, [(n + 1, s) for n, s in enumerate(lines[:starts[0]])],
                             kind="front matter")
            if not front_matter:
                front.read, front.skip_reason = False, "text before the first chapter heading (front matter)"
            chapters.append(front)
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(lines)
            chapters.append(_chapter(lines[start].strip(), path.name,
                                     [(n + 1, lines[n]) for n in range(start, end)]))
    return Book(path, path.stem, chapters=chapters)


def _chapter(title: str, source: str, numbered: list[tuple[int, str]], kind: str = "chapter") -> Chapter:
    """A chapter from (source line, text line) pairs: blank-line runs made one, edges trimmed."""
    kept: list[tuple[int, str]] = []
    for n, line in numbered:
        line = line.rstrip()
        if not line.strip() and (not kept or not kept[-1][1]):
            continue
        kept.append((n, line if line.strip() else ""))
    while kept and not kept[-1][1]:
        kept.pop()
    chapter = Chapter(title, "\n".join(s for _, s in kept), source, [n for n, _ in kept], kind)
    if not chapter.words:
        chapter.read, chapter.skip_reason = False, "no words"
    return chapter


# -- Markdown ---------------------------------------------------------------------------------------
def _inline_text(token) -> list[str]:
    """An inline token's words as lines (soft and hard breaks start a new line): text, code and
    link text kept, images and raw HTML left out."""
    lines = [""]
    for child in token.children or []:
        if child.type in ("softbreak", "hardbreak"):
            lines.append("")
        elif child.type in ("text", "code_inline"):
            lines[-1] += child.content
    return lines


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    """A leading YAML-style block (`---` lines around `key: value` lines): its simple fields, and the
    text with the block's lines left blank (line numbers stay the file's)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, text
    fields = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip().lower()] = value.strip().strip("'\"")
    return fields, "\n" * end + "\n" + "\n".join(lines[end + 1:])


def _read_markdown(path: Path, text: str, front_matter: bool) -> Book:
    from markdown_it import MarkdownIt
    fields, text = _front_matter(text)
    tokens = MarkdownIt("commonmark").parse(text)
    levels = sorted({int(t.tag[1:]) for t in tokens if t.type == "heading_open"})
    top = levels[0] if levels else 0
    title = fields.get("title", "")
    # one heading at the top level over deeper ones is the book's title; its chapters are one level down
    if len(levels) > 1 and sum(1 for t in tokens if t.type == "heading_open" and t.tag == f"h{top}") == 1:
        title_token = next(tokens[i + 1] for i, t in enumerate(tokens) if t.type == "heading_open" and t.tag == f"h{top}")
        title = title or " ".join(_inline_text(title_token)).strip()
        title_line, top = title_token.map[0] + 1, levels[1]
    else:
        title_line = 0
    blocks: list[tuple[str, int, list[str]]] = []   # (kind, first source line, text lines)
    for i, t in enumerate(tokens):
        if t.type != "inline" or t.map is None or t.map[0] + 1 == title_line:
            continue
        opener = tokens[i - 1]
        kind = "heading" if opener.type == "heading_open" and int(opener.tag[1:]) == top else "text"
        blocks.append((kind, t.map[0] + 1, _inline_text(t)))
    chapters: list[Chapter] = []
    current: list[tuple[int, str]] = []
    current_title, current_kind = "Front matter", "front matter"

    def close():
        if current_kind == "front matter" and not any(s.strip() for _, s in current):
            return
        chapter = _chapter(current_title, path.name, current, current_kind)
        if current_kind == "front matter" and not front_matter:
            chapter.read, chapter.skip_reason = False, "text before the first chapter heading (front matter)"
        chapters.append(chapter)

    for kind, line, lines in blocks:
        if kind == "heading":
            close()
            current_title, current_kind, current = " ".join(s.strip() for s in lines).strip(), "chapter", []
        if current:
            current.append((line, ""))   # a paragraph break between blocks
        current += [(line + k, s) for k, s in enumerate(lines)]
    close()
    return Book(path, title or path.stem, fields.get("author", ""), fields.get("language", fields.get("lang", "")),
                chapters=chapters)


# -- EPUB -------------------------------------------------------------------------------------------
_EPUB_NS = "http://www.idpf.org/2007/ops"
_FONT_OBFUSCATION = {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
_BLOCKS = {"p", "div", "section", "article", "h1", "h2", "h3", "h4", "h5", "h6", "li", "blockquote", "br",
           "tr", "dt", "dd", "figcaption", "pre", "hr", "header", "footer", "aside", "nav", "table", "ul", "ol"}


def _epub_problems(path: Path) -> list[tuple[str, str]]:
    """What stops an EPUB before ebooklib reads it: not a zip, no container, a part too large to
    inflate (its size read from the zip's directory), damaged XML, DRM."""
    if not zipfile.is_zipfile(path):
        return [("", "not an EPUB (not a zip archive)")]
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            too_large = _oversized_members(infos)
            if too_large:
                return too_large
            damaged = _damaged_members(z, infos)
            if damaged:
                return damaged
            names = {info.filename for info in infos}
            if "META-INF/container.xml" not in names:
                return [("", "not an EPUB (no META-INF/container.xml)")]
            if "META-INF/rights.xml" in names:
                return [("", "DRM-protected (META-INF/rights.xml): Kazeia reads only books without DRM")]
            if "META-INF/encryption.xml" in names:
                try:
                    root = parse_xml(z.read("META-INF/encryption.xml"))
                except ValueError as e:
                    return [("META-INF/encryption.xml", str(e))]
                methods = [m.get("Algorithm", "") for m in root.iter("{*}EncryptionMethod")]
                if any(m not in _FONT_OBFUSCATION for m in methods):
                    return [("", "DRM-protected (encrypted content in META-INF/encryption.xml): "
                                 "Kazeia reads only books without DRM")]
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as e:
        return [("", f"not a readable EPUB ({e})")]
    return []


def _oversized_members(infos: list[zipfile.ZipInfo]) -> list[tuple[str, str]]:
    """The parts whose inflated size (as the zip's directory declares it) is over its limit, and the
    book's total over MAX_EPUB_BYTES: all refused before one byte is inflated."""
    if len(infos) > MAX_EPUB_MEMBERS:
        return [("", f"{len(infos):,} parts in the archive, over the limit of {MAX_EPUB_MEMBERS:,}")]
    problems = []
    for info in infos:
        text = info.filename.lower().endswith(EPUB_TEXT_SUFFIXES)
        limit = MAX_EPUB_TEXT_MEMBER_BYTES if text else MAX_EPUB_MEMBER_BYTES
        if info.file_size > limit:
            problems.append((info.filename, f"{info.file_size:,} bytes inflated, over the limit of {limit:,} "
                                            f"for {'a text' if text else 'an'} part"))
    total = sum(info.file_size for info in infos)
    if total > MAX_EPUB_BYTES:
        problems.append(("", f"{total:,} bytes inflated in all, over the limit of {MAX_EPUB_BYTES:,}"))
    return problems


def _damaged_members(z: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> list[tuple[str, str]]:
    """Every part inflated once, a MiB at a time, and checked against its CRC: a part that inflates
    past the size the directory records (zipfile would inflate up to 2 GiB in one step before cutting
    it there) or is damaged is found here, in bounded memory, before ebooklib reads it whole."""
    problems = []
    for info in infos:
        try:
            with z.open(info) as part:
                while part.read(1 << 20):
                    pass
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as e:
            problems.append((info.filename, f"damaged ({e})"))
    return problems


def parse_xml(data: bytes):
    """An XML part of a book, parsed without entities (a billion-laughs part expands nothing; libxml2
    also refuses its amplification), without the network, within lxml's default size limits
    (huge_tree off); ValueError saying what is damaged."""
    from lxml import etree
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as e:
        raise ValueError(f"damaged XML ({e})") from None
    if root is None:
        raise ValueError("empty XML")
    return root


def _epub_types(element) -> set[str]:
    return set((element.get(f"{{{_EPUB_NS}}}type") or element.get("epub:type") or "").split())


def _html_paragraphs(content: bytes, notes: str) -> tuple[list[tuple[int, str]], str, set[str]]:
    """(source line, paragraph) pairs of an XHTML part, its first heading, and its epub:types."""
    from lxml import etree, html
    try:
        root = etree.fromstring(content, etree.XMLParser(recover=True, resolve_entities=False, no_network=True,
                                                         huge_tree=False, load_dtd=False))
    except etree.XMLSyntaxError:
        root = None
    if root is None:
        root = html.fromstring(content)
    for element in root.iter():
        if isinstance(element.tag, str) and "}" in element.tag:
            element.tag = element.tag.split("}", 1)[1]
    kinds: set[str] = set()
    body = root.find(".//body")
    body = body if body is not None else root
    for element in [body, *body]:
        if isinstance(element.tag, str):
            kinds |= _epub_types(element)
    for element in list(body.iter("script", "style")):
        element.getparent().remove(element)
    if notes == "skip":
        for element in list(body.iter()):
            if not isinstance(element.tag, str) or element.getparent() is None:
                continue
            types = _epub_types(element)
            noteref = "noteref" in types or (element.tag == "sup" and element.find("a") is not None
                                             and len("".join(element.itertext()).strip()) <= 4)
            if types & NOTE_KINDS or noteref:
                _remove_keeping_tail(element)
    heading = ""
    for h in body.iter("h1", "h2", "h3"):
        heading = " ".join("".join(h.itertext()).split())
        if heading:
            break
    paragraphs: list[tuple[int, str]] = []
    buffer: list[str] = []
    line = [0]

    def flush():
        words = " ".join("".join(buffer).split())
        if words:
            paragraphs.append((line[0], words))
        buffer.clear()

    def walk(element):
        if not isinstance(element.tag, str):
            if element.tail:
                buffer.append(element.tail)
            return
        block = element.tag in _BLOCKS
        if block:
            flush()
            line[0] = element.sourceline or line[0]
        elif not buffer and element.sourceline:
            line[0] = line[0] or element.sourceline
        if element.text:
            buffer.append(element.text)
        for child in element:
            walk(child)
        if block:
            flush()
        if element.tail:
            buffer.append(element.tail)

    for child in body:
        walk(child)
    if body.text:
        buffer.insert(0, body.text)
    flush()
    return paragraphs, heading, kinds


def _remove_keeping_tail(element) -> None:
    parent, tail = element.getparent(), element.tail
    if tail:
        previous = element.getprevious()
        if previous is not None:
            previous.tail = (previous.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(element)


def _escape(text: str) -> str:
    """Text taken from HTML carries no Kazeia markup: its brackets and backslashes are spoken as they are."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def _toc_titles(toc, out: dict[str, str]) -> dict[str, str]:
    """The table of contents' title of each part (its file name, without #fragment); the first wins."""
    for entry in toc:
        if isinstance(entry, tuple):
            section, children = entry
            href = getattr(section, "href", "") or ""
            if href:
                out.setdefault(href.split("#")[0], section.title)
            _toc_titles(children, out)
        else:
            out.setdefault((entry.href or "").split("#")[0], entry.title)
    return out


def _read_epub(path: Path, notes: str, skip_kinds: frozenset) -> Book:
    problems = _epub_problems(path)
    if problems:
        raise BookError(path, problems)
    import warnings
    import ebooklib
    from ebooklib import epub
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            book = epub.read_epub(str(path), {"ignore_ncx": False})
    except Exception as e:   # (ebooklib raises bare KeyError/EpubException/XMLSyntaxError for a damaged book)
        raise BookError(path, [("", f"not a readable EPUB: {type(e).__name__}: {e}")]) from None

    def meta(name: str) -> str:
        values = book.get_metadata("DC", name)
        return str(values[0][0]).strip() if values and values[0][0] else ""

    result = Book(path, meta("title") or path.stem, meta("creator"), meta("language"))
    cover = next(iter(book.get_items_of_type(ebooklib.ITEM_COVER)), None)
    if cover is None:
        cover_id = next((m[1].get("content") for m in book.get_metadata("OPF", "cover") if m[1].get("content")), None)
        cover = book.get_item_with_id(cover_id) if cover_id else None
    if cover is not None and getattr(cover, "media_type", "").startswith("image/"):
        result.cover, result.cover_type = cover.get_content(), cover.media_type
    titles = _toc_titles(book.toc, {})
    for item_id, linear in book.spine:
        item = book.get_item_with_id(item_id)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        name = item.get_name()
        paragraphs, heading, kinds = _html_paragraphs(item.content or item.get_content(), notes)   # (as written: get_content re-renders it without the body's attributes)
        title = titles.get(name) or heading or Path(name).stem
        kind = next(iter(sorted(kinds & (skip_kinds | NOTE_KINDS))), None) or next(iter(sorted(kinds)), "chapter")
        if isinstance(item, epub.EpubNav):
            kinds.add("toc")
            kind = "toc"
        if paragraphs and heading and paragraphs[0][1] != heading:
            paragraphs.insert(0, (paragraphs[0][0], heading))
        numbered: list[tuple[int, str]] = []
        for line, paragraph in paragraphs:
            if numbered:
                numbered.append((line, ""))
            numbered.append((line, _escape(paragraph)))
        chapter = _chapter(title, name, numbered, kind)
        if linear == "no":
            chapter.read, chapter.skip_reason = False, "outside the reading order (linear=\"no\")"
        elif kinds & skip_kinds:
            chapter.read, chapter.skip_reason = False, f"marked {', '.join(sorted(kinds & skip_kinds))}"
        elif notes == "skip" and kinds & NOTE_KINDS:
            chapter.read, chapter.skip_reason = False, "notes (read with notes=\"read\")"
        result.chapters.append(chapter)
    return result
