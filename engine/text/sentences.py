"""Sentences, and chunks of them under a budget. Sentence boundaries come from sentencex (Wikimedia's
segmenter: abbreviations per language, decimals, URLs, e-mail addresses, CJK 。！？, quotes and
brackets kept with their sentence); two mends on top of it, for what it splits that a reader would
not (a French "M." before a name, "c.-à-d."). A sentence longer than the budget is cut at clause
marks (`;` `:` and their CJK forms, never inside "10:30" or "https:"), then at commas, then between
words, then anywhere: no chunk is ever over the budget."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

import sentencex

# The model's language names -> sentencex's codes (dialects speak Chinese text)
LANGUAGE_CODES = {"english": "en", "chinese": "zh", "japanese": "ja", "korean": "ko", "german": "de", "french": "fr",
          "russian": "ru", "portuguese": "pt", "spanish": "es", "italian": "it", "beijing_dialect": "zh",
          "sichuan_dialect": "zh"}
# abbreviations sentencex ends a sentence at, that in running text never end one
_NEVER_LAST = {"fr": {"M.", "MM.", "Mme.", "Mlle.", "Dr.", "Pr.", "St.", "Ste.", "c.", "p.", "env.", "cf."}}
_CJK_CLOSING = set("”’」』）》〉】")
_CJK_OPENING = set("“‘「『（《〈【")
# clause marks followed by a space ("10:30", "https://" and "3,5" have none), and the CJK forms
_CLAUSE = re.compile(r"[;:](?=\s)|[；：]")
_COMMA = re.compile(r",(?=\s)|[，、]")
Counter = Callable[[str], int]


# A chunk at most this long: one prompt's text (the engine takes 2048 tokens in one request).
MAX_BUDGET = {"max_chars": 8000, "max_tokens": 2048}


@dataclass(frozen=True)
class Budget:
    """How much text one chunk may hold. Defaults: long single prompts degrade (one ggml port hears
    artifacts past ~600 characters / 200 frames, one studio a robotic voice near 5,000 characters),
    and peers that sound right split into sentences; 250 characters or 64 tokens is ~15 s of speech
    at an ordinary pace in English (64 tokens of Chinese: ~14 s), under that limit with room for slow
    voices, and short enough that the first chunk starts speaking soon."""
    max_chars: int = 250
    max_tokens: int = 64

    def validate(self) -> None:
        for name in ("max_chars", "max_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 8 <= value <= MAX_BUDGET[name]:
                raise ValueError(f"{name} must be a whole number from 8 to {MAX_BUDGET[name]}, got {value!r}")


def language_code(language: str | None, text: str) -> str:
    """sentencex's code for a model language name; for auto (None), from the text's script."""
    if language and language.lower() != "auto":
        return LANGUAGE_CODES.get(language.lower(), "en")
    counts = {"kana": 0, "han": 0, "hangul": 0, "cyrillic": 0}
    for c in text[:2000]:
        name = unicodedata.name(c, "")
        if name.startswith(("HIRAGANA", "KATAKANA")):
            counts["kana"] += 1
        elif name.startswith("CJK UNIFIED"):
            counts["han"] += 1
        elif name.startswith("HANGUL"):
            counts["hangul"] += 1
        elif name.startswith("CYRILLIC"):
            counts["cyrillic"] += 1
    if counts["kana"]:
        return "ja"
    best = max(("han", "hangul", "cyrillic"), key=counts.get)
    return {"han": "zh", "hangul": "ko", "cyrillic": "ru"}[best] if counts[best] else "en"


def split_sentences(text: str, language: str | None = None, code: str | None = None) -> list[str]:
    """`text` (one paragraph) as sentences; joined back they give the text less outer whitespace.
    `code`: sentencex's language, when not the one language_code gives."""
    code = code or language_code(language, text)
    parts = [p for p in sentencex.segment(code, text) if p.strip()]
    merged: list[str] = []
    never_last = _NEVER_LAST.get(code, set())
    for part in parts:
        if merged and _continues(merged[-1], part, never_last):
            merged[-1] += part
        else:
            merged.append(part)
    return [m.strip() for m in merged]


def _continues(before: str, part: str, never_last: set[str]) -> bool:
    """Whether sentencex cut inside a sentence: after an abbreviation that never ends one, before a
    piece that starts with a hyphen or a lower-case letter (no sentence starts so), or between a CJK
    quotation and what follows it without a break (“好的。”他说。 is one sentence)."""
    last_word = before.split()[-1] if before.split() else ""
    head = part[:1]
    if last_word in never_last or head == "-" or (head.isalpha() and head.islower()):
        return True
    return before.rstrip()[-1:] in _CJK_CLOSING and before[-1:] in _CJK_CLOSING and _is_cjk(head) \
        and head not in _CJK_OPENING


def pack(sentences: list[str], budget: Budget, count_tokens: Counter | None = None) -> list[str]:
    """Sentences into as few chunks as fit the budget, in order; a sentence over it is cut first."""
    budget.validate()
    tokens = count_tokens or (lambda s: 0)

    def fits(s: str) -> bool:
        return len(s) <= budget.max_chars and tokens(s) <= budget.max_tokens

    pieces = [p for s in sentences for p in _cut(s, fits)]
    chunks: list[str] = []
    for piece in pieces:
        joined = _join(chunks[-1], piece) if chunks else None
        if joined is not None and fits(joined):
            chunks[-1] = joined
        else:
            chunks.append(piece)
    return chunks


def _join(a: str, b: str) -> str:
    """Two pieces of one text side by side: a space between them, unless both sides are CJK."""
    return a + b if _is_cjk(a[-1:]) and _is_cjk(b[:1]) else f"{a} {b}"


def _is_cjk(c: str) -> bool:
    return bool(c) and unicodedata.east_asian_width(c) in ("W", "F")


def _cut(sentence: str, fits: Callable[[str], bool]) -> list[str]:
    """A sentence over the budget, cut at the loosest marks that bring every piece under it."""
    if fits(sentence):
        return [sentence]
    for mark in (_CLAUSE, _COMMA):
        pieces = _split_after(sentence, mark)
        if len(pieces) > 1:
            return _regroup([q for p in pieces for q in _cut(p, fits)], fits)
    words = sentence.split(" ") if " " in sentence.strip() else None
    if words and len(words) > 1:
        return _regroup([q for w in words if w for q in _cut(w, fits)], fits)
    # one long run with no marks (a long CJK clause, a very long word): halves until they fit
    half = len(sentence) // 2
    return _cut(sentence[:half], fits) + _cut(sentence[half:], fits)


def _split_after(text: str, mark: re.Pattern) -> list[str]:
    pieces, start = [], 0
    for m in mark.finditer(text):
        pieces.append(text[start:m.end()].strip())
        start = m.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def _regroup(pieces: list[str], fits: Callable[[str], bool]) -> list[str]:
    out: list[str] = []
    for p in pieces:
        if out and fits(_join(out[-1], p)):
            out[-1] = _join(out[-1], p)
        else:
            out.append(p)
    return out
