"""Books made in the tests: an EPUB with a cover, a table of contents, a title page, two chapters and a
footnote (written with ebooklib, as publishing tools write them), and a Markdown book."""
from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path


def png_bytes() -> bytes:
    """A 1x1 PNG (the cover)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


def make_epub(path: Path, chapters: list[tuple[str, str]] | None = None) -> Path:
    """An EPUB 3: cover image, nav and NCX, a title page (epub:type titlepage), then `chapters`
    ((title, XHTML body)); the default two have a footnote with its reference mark in chapter one."""
    from ebooklib import epub
    ns = 'xmlns:epub="http://www.idpf.org/2007/ops"'
    chapters = chapters or [
        ("Chapter One", '<section epub:type="chapter"><h1>Chapter One</h1><p>It was a bright day.'
                        '<a epub:type="noteref" href="#n1">1</a> The end came soon.</p>'
                        '<p>A second paragraph, with <em>emphasis</em>.</p>'
                        '<aside epub:type="footnote" id="n1"><p>A footnote nobody hears.</p></aside></section>'),
        ("Chapter Two", "<h1>Chapter Two</h1><p>Another day, another sentence.</p>")]
    book = epub.EpubBook()
    book.set_identifier("kazeia-test-book")
    book.set_title("The Test Book")
    book.set_language("en")
    book.add_author("Ada Writer")
    book.set_cover("cover.png", png_bytes())
    title = epub.EpubHtml(title="Title page", file_name="title.xhtml", lang="en")
    title.content = (f'<html {ns}><body><section epub:type="titlepage"><h1>The Test Book</h1>'
                     f'<p>by Ada Writer</p></section></body></html>')
    items = [title]
    for k, (name, body) in enumerate(chapters, 1):
        item = epub.EpubHtml(title=name, file_name=f"c{k}.xhtml", lang="en")
        item.content = f"<html {ns}><body>{body}</body></html>"
        items.append(item)
    for item in items:
        book.add_item(item)
    book.toc = tuple(epub.Link(i.file_name, i.title, i.file_name) for i in items[1:])
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["cover", "nav", *items]
    epub.write_epub(str(path), book)
    return path


def with_drm(epub_path: Path, out: Path) -> Path:
    """`epub_path` with its chapters listed as encrypted (AES), as a store's DRM leaves a book."""
    encryption = ('<?xml version="1.0"?><encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                  'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
                  '<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
                  '<enc:CipherData><enc:CipherReference URI="EPUB/c1.xhtml"/></enc:CipherData>'
                  '</enc:EncryptedData></encryption>')
    with zipfile.ZipFile(epub_path) as src, zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            dst.writestr(item, src.read(item.filename))
        dst.writestr("META-INF/encryption.xml", encryption)
    return out


MARKDOWN_BOOK = """---
title: A Markdown Book
author: Sam Author
---

# A Markdown Book

A foreword nobody asked for.

## The Start

It begins *here*, with a [link](https://example.org) and `code`.
A second line [pause:300ms] of the same paragraph.

```
code blocks are not read
```

## The End

It ends. Quietly.
"""
