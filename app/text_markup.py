"""The text box's markup, shown as the operator types: tags ([pause:..], [voice=..], [lang=..], SSML
elements) and dialogue names in the link colour, escapes muted, every other chunk of a long text on a
faint tint (where one chunk ends and the next begins), and the first markup error underlined
where it is, its message under the box beside what the text will make (chunks, pauses, voices). The
check is the engine's own text front end (kazeia.engine.text), run on the GUI thread a moment after
typing stops: it is pure Python and reads no model (chunks counted by characters; the take's own
plan counts the model's tokens too, so a CJK text may make more)."""
from __future__ import annotations

import re

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPalette, QSyntaxHighlighter, QTextCharFormat

from kazeia.engine.text.compose import Cast, PlannedChunk, compose
from kazeia.engine.text.markup import MarkupError

from .elided_label import ElidedLabel

_TAG = re.compile(r"(?<!\\)\[\s*(?:pause|voice|lang|language)\s*[:=][^\]\[]*\]|</?(?:speak|p|s|break)\b[^>]*>",
                  re.IGNORECASE)
_ESCAPE = re.compile(r"\\[\[\]\\]")
_TURN = re.compile(r"^[ \t]*([^\W\d_][\w .'-]{0,39}?)[ \t]*:[ \t]")
_BETWEEN_WORDS = r"(?:\s|(?<!\\)\[[^\]\[]*\]|<[^<>]*>)*"   # what may lie between a chunk's words in the text


def chunk_spans(text: str, chunks) -> list[tuple[int, int] | None]:
    """Where each chunk's words lie in `text` ([start, end) offsets), found in order: its written
    words with anything markup may put between them (spaces, line breaks, tags). None for a chunk
    whose words the markup rewrote (an SSML entity): the tint skips it."""
    spans: list[tuple[int, int] | None] = []
    at = 0
    for chunk in chunks:
        words = chunk.written.split()
        pattern = _BETWEEN_WORDS.join("".join(r"\\?" + re.escape(c) if c in "[]\\" else re.escape(c) for c in w)
                                      for w in words)
        m = re.compile(pattern).search(text, at) if words else None
        spans.append((m.start(), m.end()) if m else None)
        at = m.end() if m else at
    return spans


class MarkupHighlighter(QSyntaxHighlighter):
    def __init__(self, editor, names=()):
        super().__init__(editor.document())
        self.editor = editor   # (its palette: the theme's link colour for tags)
        self.names: set[str] = {n.casefold() for n in names}
        self.error_at: tuple[int, int] | None = None   # (line, column), 1-based
        self.chunks: list[tuple[int, int] | None] = []   # each chunk's span in the text (chunk_spans)

    def set_names(self, names) -> None:
        self.names = {n.casefold() for n in names}
        self.rehighlight()

    def set_error(self, at: tuple[int, int] | None) -> None:
        if at != self.error_at:
            self.error_at = at
            self.rehighlight()

    def set_chunks(self, spans: list[tuple[int, int] | None]) -> None:
        if spans != self.chunks:
            self.chunks = spans
            self.rehighlight()

    def highlightBlock(self, text: str) -> None:
        palette = self.editor.palette()
        self._tint_chunks(text, palette)
        tag = QTextCharFormat()
        tag.setForeground(palette.color(QPalette.Link))
        tag.setFontWeight(600)
        muted = QTextCharFormat()
        muted.setForeground(palette.color(QPalette.Disabled, QPalette.Text))
        for m in _TAG.finditer(text):
            self._merge(m.start(), m.end() - m.start(), tag)
        for m in _ESCAPE.finditer(text):
            self._merge(m.start(), 1, muted)
        turn = _TURN.match(text)
        if turn and turn[1].strip().casefold() in self.names:
            self._merge(turn.start(1), turn.end() - turn.start(1), tag)
        line = self.currentBlock().blockNumber() + 1
        if self.error_at and self.error_at[0] == line:
            wrong = QTextCharFormat()
            wrong.setUnderlineStyle(QTextCharFormat.WaveUnderline)
            wrong.setUnderlineColor(QColor("#d32f2f"))
            column = max(0, min(self.error_at[1] - 1, len(text) - 1))
            end = text.find("]", column)
            self._merge(column, max(1, (end + 1 if end >= 0 else column + 1) - column), wrong)

    def _tint_chunks(self, text: str, palette) -> None:
        """Every other chunk on a faint tint of the selection colour (only when there are several)."""
        if len(self.chunks) < 2:
            return
        tint = QTextCharFormat()
        color = QColor(palette.color(QPalette.Highlight))
        color.setAlpha(48)
        tint.setBackground(color)
        first = self.currentBlock().position()
        for index, span in enumerate(self.chunks):
            if span is None or index % 2 == 0:
                continue
            start, end = max(span[0], first) - first, min(span[1], first + len(text)) - first
            if end > start:
                self.setFormat(start, end - start, tint)

    def _merge(self, start: int, length: int, fmt: QTextCharFormat) -> None:
        """`fmt` over what the range has already (a chunk's tint stays under a tag)."""
        for i in range(start, start + length):
            merged = QTextCharFormat(self.format(i))
            merged.merge(fmt)
            self.setFormat(i, 1, merged)


class TextPlanLabel(ElidedLabel):
    """What the text will make, or its first markup error; checks a moment after typing stops."""
    checked = Signal(str)   # the line shown (for tests and the status bar)

    def __init__(self, editor, delay_ms: int = 300):
        super().__init__("", Qt.ElideRight)   # (the line and column come first: they stay in view)
        self.editor = editor
        self.error_color = "#b00020"   # the theme's (apply_colors)
        self.highlighter = MarkupHighlighter(editor)
        self.languages: list[str] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(delay_ms)
        self._timer.timeout.connect(self.check)
        editor.textChanged.connect(self._timer.start)

    def set_model(self, speakers, languages) -> None:
        """The names dialogue lines and [voice=..] may use, and the model's languages."""
        self.highlighter.set_names(speakers)
        self.languages = list(languages)
        self.check()

    def check(self) -> str:
        text = self.editor.toPlainText()
        names = {n: Cast(speaker=n) for n in self.highlighter.names}
        try:
            plan = compose(text, default=Cast(), cast=names, languages=self.languages)
        except MarkupError as e:
            self.highlighter.set_chunks([])
            self.highlighter.set_error((e.line, e.column))
            return self._show(str(e), error=True)
        except ValueError as e:   # empty text: nothing to say yet, not an error while typing
            self.highlighter.set_chunks([])
            self.highlighter.set_error(None)
            return self._show(str(e) if text.strip() else "", error=False)
        self.highlighter.set_error(None)
        chunks = plan.chunks
        self.highlighter.set_chunks(chunk_spans(text, chunks))
        pauses = sum(1 for p in plan.pieces if not isinstance(p, PlannedChunk))
        voices = {c.voice_name for c in chunks if c.voice_name}
        if len(chunks) == 1 and not pauses:
            return self._show("")
        parts = [f"about {len(chunks)} chunk{'s' if len(chunks) != 1 else ''}", f"{pauses} pause{'s' if pauses != 1 else ''}"]
        if voices:
            parts.append(f"voices: {', '.join(sorted(voices))}")
        return self._show(", ".join(parts))

    def apply_colors(self, colors) -> None:
        self.error_color = colors.error
        self.highlighter.rehighlight()   # (tags take the palette's link colour)
        self.check()

    def _show(self, line: str, error: bool = False) -> str:
        self.setText(line)
        self.setStyleSheet(f"color: {self.error_color};" if error else "")
        self.setProperty("error", error)
        self.checked.emit(line)
        return line
