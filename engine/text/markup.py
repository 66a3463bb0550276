"""What a text asks for besides its words, parsed with positions: pauses, speaker turns, language
switches and paragraph breaks. Three forms, one result (a list of Speech / Pause / Paragraph items):

- plain text with inline tags: `[pause:500ms]`, `[pause:1.5s]`, `[voice=NAME]`, `[lang=french]`;
  `\\[`, `\\]` and `\\\\` write a bracket or a backslash; any other `[...]` is an error, not spoken;
- dialogue lines, `Name: text`, where Name is one of the request's voice names (other lines that
  look alike, "Note: ...", stay text); a turn lasts until the next turn or the end of its paragraph,
  and a [lang=...] inside it lasts as long as the turn;
- SSML, when the text starts with `<speak`: `<speak>`, `<p>`, `<s>` and `<break time="500ms"/>` only
  (read by the standard library's expat parser; anything else is an error naming the element).

Otherwise [voice=...] and [lang=...] last until the next tag of their kind. A blank line ends a paragraph; single line breaks inside one are spaces. Names and languages are
checked later, against the model (compose.py), with the positions kept here."""
from __future__ import annotations

import re
from dataclasses import dataclass
from xml.parsers import expat

MAX_PAUSE_MS = 60_000.0


class MarkupError(ValueError):
    """Bad markup: the message names the line and column (1-based) and what is wrong."""

    def __init__(self, line: int, column: int, message: str):
        super().__init__(f"line {line}, column {column}: {message}")
        self.line, self.column = line, column


@dataclass(frozen=True)
class Position:
    line: int     # 1-based
    column: int   # 1-based, in characters


@dataclass
class Speech:
    text: str
    at: Position
    voice: str | None = None      # a name from [voice=...] or a dialogue turn; None: the request's own
    language: str | None = None   # from [lang=...]; None: the request's own
    voice_at: Position | None = None      # where the voice / language were asked for (for errors later)
    language_at: Position | None = None


@dataclass
class Pause:
    ms: float
    at: Position


@dataclass
class Paragraph:
    """A paragraph break (blank line, `</p>`)."""
    at: Position


Item = Speech | Pause | Paragraph

_TAG = re.compile(r"\[\s*(?P<key>[A-Za-z]+)\s*(?P<sep>[:=])?\s*(?P<value>[^\]\[]*?)\s*\]")
_DURATION = re.compile(r"(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>ms|s)", re.IGNORECASE)   # a unit always: is "2" ms or s?
# a dialogue turn: up to 40 characters of a name, then a colon and a space, at a line's start
_TURN = re.compile(r"[ \t]*(?P<name>[^\W\d_][\w .'-]{0,39}?)[ \t]*:[ \t]+")


def parse_duration(value: str, at: Position, what: str = "pause") -> float:
    """'500ms', '1.5s', '2 s' -> milliseconds, within (0, 60 s]."""
    m = _DURATION.fullmatch(value.strip())
    if not m:
        raise MarkupError(at.line, at.column, f"{what} {value!r} is not a duration: write 500ms or 1.5s")
    ms = float(m["number"]) * (1000.0 if m["unit"].lower() == "s" else 1.0)
    if not 0 < ms <= MAX_PAUSE_MS:
        raise MarkupError(at.line, at.column, f"{what} {value!r} is out of range: more than 0 and at most 60 s")
    return ms


def parse(text: str, voice_names=()) -> list[Item]:
    """`text` as items. `voice_names`: the names dialogue turns may use (case-insensitive)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if text.lstrip().startswith("<speak"):
        return _parse_ssml(text)
    return _Plain(text, {n.casefold(): n for n in voice_names}).parse()


class _Plain:
    """Plain text with inline tags and dialogue turns, scanned line by line."""

    def __init__(self, text: str, names: dict[str, str]):
        self.text, self.names = text, names
        self.items: list[Item] = []
        self.words: list[str] = []          # the current run of speech
        self.words_at: Position | None = None
        self.voice = self.language = None
        self.voice_at = self.language_at = None
        self.before_turn: tuple | None = None   # the voice a dialogue turn replaced, back at a paragraph break

    def parse(self) -> list[Item]:
        blank_run = False
        for number, line in enumerate(self.text.splitlines(), start=1):
            if not line.strip():
                if not blank_run and self.items + self.words:   # one break however many blank lines
                    self._flush()
                    self.items.append(Paragraph(Position(number, 1)))
                    if self.before_turn is not None:   # a turn ends with its paragraph
                        (self.voice, self.voice_at, self.language, self.language_at), self.before_turn = \
                            self.before_turn, None
                blank_run = True
                continue
            blank_run = False
            start = 0
            turn = _TURN.match(line)
            if turn and turn["name"].strip().casefold() in self.names:
                self._flush()
                if self.before_turn is None:
                    self.before_turn = (self.voice, self.voice_at, self.language, self.language_at)
                else:   # a [lang=...] inside the last turn was that turn's
                    self.language, self.language_at = self.before_turn[2:]
                self.voice = self.names[turn["name"].strip().casefold()]
                self.voice_at = Position(number, turn.start("name") + 1)
                start = turn.end()
            elif self.words:
                self.words.append(" ")   # a line break inside a paragraph
            self._scan(line, number, start)
        self._flush()
        while self.items and isinstance(self.items[-1], Paragraph):   # trailing blank lines say nothing
            self.items.pop()
        return self.items

    def _scan(self, line: str, number: int, i: int) -> None:
        while i < len(line):
            c = line[i]
            if c == "\\" and i + 1 < len(line) and line[i + 1] in "[]\\":
                self._word(line[i + 1], number, i)
                i += 2
            elif c == "[":
                i = self._tag(line, number, i)
            elif c == "]":
                raise MarkupError(number, i + 1, "a ']' without its '[': write \\] for a bracket in the text")
            else:
                self._word(c, number, i)
                i += 1

    def _tag(self, line: str, number: int, i: int) -> int:
        at = Position(number, i + 1)
        m = _TAG.match(line, i)
        if not m:
            raise MarkupError(number, i + 1, "a '[' that opens no tag: tags are [pause:500ms], [voice=NAME] and "
                                             "[lang=LANGUAGE]; write \\[ for a bracket in the text")
        key, value = m["key"].lower(), m["value"]
        if key == "pause":
            if m["sep"] != ":":
                raise MarkupError(at.line, at.column, "write a pause as [pause:500ms] or [pause:1.5s]")
            self._flush()
            self.items.append(Pause(parse_duration(value, at), at))
        elif key in ("voice", "lang", "language"):
            if m["sep"] != "=" or not value:
                raise MarkupError(at.line, at.column, f"write [{key}=NAME], with a name")
            self._flush()
            if key == "voice":
                self.voice, self.voice_at = value, Position(number, m.start("value") + 1)
                self.before_turn = None   # chosen by name: it lasts past the paragraph
            else:
                self.language, self.language_at = value.lower(), Position(number, m.start("value") + 1)
        else:
            raise MarkupError(at.line, at.column, f"unknown tag [{m['key']}...]: tags are [pause:500ms], "
                                                  "[voice=NAME] and [lang=LANGUAGE]; write \\[ for a bracket")
        return m.end()

    def _word(self, c: str, number: int, i: int) -> None:
        if not self.words and c.isspace():
            return
        if not self.words:
            self.words_at = Position(number, i + 1)
        self.words.append(c)

    def _flush(self) -> None:
        said = "".join(self.words).strip()
        if said:
            self.items.append(Speech(said, self.words_at, self.voice, self.language, self.voice_at, self.language_at))
        self.words, self.words_at = [], None


_SSML_ELEMENTS = {"speak", "p", "s", "break"}
_SSML_ATTRIBUTES = {"speak": {"version", "xmlns", "xml:lang"}, "p": set(), "s": set(), "break": {"time"}}


def _parse_ssml(text: str) -> list[Item]:
    """The SSML subset, with expat's line and column (0-based columns, hence + 1)."""
    items: list[Item] = []
    words: list[str] = []
    words_at: list[Position | None] = [None]
    open_elements: list[str] = []
    parser = expat.ParserCreate()

    def here() -> Position:
        return Position(parser.CurrentLineNumber, parser.CurrentColumnNumber + 1)

    def flush() -> None:
        said = " ".join("".join(words).split())
        if said:
            items.append(Speech(said, words_at[0] or here()))
        words.clear()
        words_at[0] = None

    def start(name: str, attributes: dict) -> None:
        at = here()
        if name not in _SSML_ELEMENTS:
            raise MarkupError(at.line, at.column, f"<{name}> is not supported: Kazeia reads <speak>, <p>, <s> and "
                                                  "<break time=\"500ms\"/> (anything else would be spoken or lost)")
        unknown = set(attributes) - _SSML_ATTRIBUTES[name]
        if unknown:
            raise MarkupError(at.line, at.column, f"<{name}> has unsupported attribute(s) {', '.join(sorted(unknown))}")
        if (name == "speak") != (not open_elements):
            raise MarkupError(at.line, at.column, "<speak> must be the one outer element")
        open_elements.append(name)
        if name in ("p", "s", "break"):
            flush()
        if name == "break":
            if "time" not in attributes:
                raise MarkupError(at.line, at.column, "<break/> needs a time, e.g. <break time=\"500ms\"/>")
            items.append(Pause(parse_duration(attributes["time"], at, "break time"), at))

    def end(name: str) -> None:
        open_elements.pop()
        if name in ("p", "s"):
            flush()
        if name == "p":
            items.append(Paragraph(here()))

    def characters(data: str) -> None:
        if not open_elements:
            return
        if open_elements[-1] == "break" and data.strip():
            at = here()
            raise MarkupError(at.line, at.column, "<break> holds no text: write <break time=\"500ms\"/>")
        if words_at[0] is None and data.strip():
            words_at[0] = here()
        words.append(data)

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(text, True)
    except expat.ExpatError as e:
        raise MarkupError(e.lineno, e.offset + 1, f"not well-formed SSML: {expat.errors.messages[e.code]}") from None
    flush()
    while items and isinstance(items[-1], Paragraph):
        items.pop()
    return items
