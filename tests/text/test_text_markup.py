"""Markup: pauses, voices, languages, escapes, dialogue and the SSML subset, every error at its line
and column."""
from __future__ import annotations

import re

import pytest

from kazeia.engine.text.markup import MarkupError, Paragraph, Pause, Speech, parse


def said(items):
    return [(i.text, i.voice, i.language) if isinstance(i, Speech) else
            ("pause", i.ms) if isinstance(i, Pause) else "para" for i in items]


def test_inline_tags_escapes_and_paragraphs():
    text = ("Hello [pause:500ms] world.\nSecond line.\n\n\n"
            "A \\[1\\] note, a back\\\\slash. [voice=ryan]Hi [pause:1.5s][lang=French]Bonjour.")
    assert said(parse(text)) == [
        ("Hello", None, None), ("pause", 500.0), ("world. Second line.", None, None), "para",
        ("A [1] note, a back\\slash.", None, None), ("Hi", "ryan", None), ("pause", 1500.0),
        ("Bonjour.", "ryan", "french")]
    items = parse(text)
    assert (items[2].at.line, items[2].at.column) == (1, 21)
    assert (items[5].voice_at.line, items[5].voice_at.column) == (5, 37)


def test_dialogue_turns_only_for_known_names_and_end_with_their_paragraph():
    text = "Alice: Hi there.\nbob: Hello!\nNote: not a turn.\n\nNarration again.\n\nALICE: Bye."
    assert said(parse(text, ["Alice", "Bob"])) == [
        ("Hi there.", "Alice", None), ("Hello! Note: not a turn.", "Bob", None), "para",
        ("Narration again.", None, None), "para", ("Bye.", "Alice", None)]
    # without names nothing is a turn: the colon lines are text
    assert said(parse("Alice: Hi.", [])) == [("Alice: Hi.", None, None)]


def test_ssml_subset():
    ssml = ('<speak>\n  <p><s>One.</s><break time="1.5s"/><s>Two &amp; three.</s></p>\n'
            '  <p>Para   two.</p>\n</speak>')
    items = parse(ssml)
    assert said(items) == [("One.", None, None), ("pause", 1500.0), ("Two & three.", None, None), "para",
                           ("Para two.", None, None)]
    assert (items[0].at.line, items[0].at.column) == (2, 9)


@pytest.mark.parametrize("text, line, column, says", [
    ("Hi [pause 5]", 1, 4, "[pause:500ms]"),
    ("Hi [pause:0ms]", 1, 4, "out of range"),
    ("Hi [pause:61s]", 1, 4, "out of range"),
    ("Hi [pause:soon]", 1, 4, "not a duration"),
    ("Hi [pause:2]", 1, 4, "not a duration"),
    ("x\n  [foo] y", 2, 3, "unknown tag"),
    ("one [two", 1, 5, "opens no tag"),
    ("a ] b", 1, 3, "without its '['"),
    ("Hi [voice=]", 1, 4, "with a name"),
    ("<speak><emphasis>x</emphasis></speak>", 1, 8, "<emphasis> is not supported"),
    ('<speak><break/></speak>', 1, 8, "needs a time"),
    ('<speak><break time="5" strength="x"/></speak>', 1, 8, "unsupported attribute"),
    ("<speak><p>x</speak>", 1, 14, "not well-formed"),
    ("<speak>x</speak><speak>y</speak>", 1, 17, "not well-formed"),
])
def test_markup_errors_name_line_and_column(text, line, column, says):
    with pytest.raises(MarkupError, match=f"^line {line}, column {column}: .*{re.escape(says)}") as e:
        parse(text)
    assert (e.value.line, e.value.column) == (line, column)


def test_paragraph_items_and_trailing_blank_lines():
    items = parse("One.\n\n\nTwo.\n\n\n")
    assert [type(i) for i in items] == [Speech, Paragraph, Speech]
