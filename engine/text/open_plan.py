"""The plan of a text still being written (a language model's answer, an operator typing): what of
compose()'s plan of the whole text the text so far already decides, whatever is written after it.

The long-text front end decides left to right: sentences packed greedily under the budget, a new
chunk at every break (paragraph, pause, voice or language). So a chunk is settled once a later piece
did not fit it or a break follows it; the open chunk (the next one) holds the sentences packed into
it so far, and while its first sentence is still being written, the words of it that any ending of
the sentence keeps in the chunk (`_known_words`). What is held back, and why:
- a sentence end until sentencex keeps it whatever comes next (_NEXT: it decides a boundary by what
  follows it, and a sentence starting in lower case joins the one before, sentences._continues), in
  every language an auto paragraph may yet be read in (a kana or Cyrillic character later changes it);
- sentences after a quotation mark or bracket still open or in doubt, and the one just before it
  (sentencex ends no sentence inside a pair, however long);
- an unclosed tag at the end, and a last line that may still become a dialogue turn ("Ann" before
  "Anna: ...");
- SSML (one XML document): everything, until the text ends;
- with a lexicon, a chunk's words until the chunk is settled (a rule may span what follows).

A live take (engine/synthesis/live_take.py) speaks each chunk as soon as its words are known, and each is
the whole text's chunk, seed and pause: tests/text/test_open_plan.py checks every prefix of many
texts against the whole text's plan."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache, reduce
from os.path import commonprefix

from .compose import PlannedChunk, _Planner
from .markup import Speech, parse
from .sentences import _CLAUSE, _COMMA, Budget, _is_cjk, _join, language_code, pack, split_sentences

_NEXT_WORD = "\ue000"   # (a private-use character: no text's own)


@dataclass
class OpenPlan:
    settled: list                        # the whole text's first pieces (PlannedChunk, ms), ending with a chunk
    open_chunk: PlannedChunk | None      # the next chunk, its `text` the words known so far; None: none yet
    pause_before: float = 0.0            # ms of silence between the last settled chunk and the open one
    ahead: str = ""   # what the open chunk goes on with, if it goes on (the text written after its known words)


def compose_open(text: str, **compose_args) -> OpenPlan:
    """What the text so far decides of compose(text + anything, **compose_args)."""
    nothing = OpenPlan([], None)
    head = text.lstrip()[:6]
    if not head or head.startswith("<speak") or "<speak".startswith(head):   # (SSML: one document)
        return nothing
    planner = _Planner(**compose_args)
    written = _without_open_markup(text, planner.cast)
    if not written.strip():
        return nothing
    # (the item the text's end belongs to: the one a word written next would join)
    items = parse(written + _NEXT_WORD, planner.cast.keys())
    last = items.pop()
    last = replace(last, text=last.text[:-len(_NEXT_WORD)].rstrip())
    # (the last word is whole: a space follows it, or a tag, which ends the words before it)
    word_done = written[-1].isspace() or text[len(written):len(written) + 1] == "["
    for item in items:
        planner.add(item, _sentences(item.text, planner.language_of(item)) if isinstance(item, Speech) else None)
    if not last.text:   # the text ends at a break: every chunk so far is settled
        return OpenPlan(list(planner.pieces), None)
    voice_name, chosen = planner.voice_of(last)
    lang = planner.language_of(last)
    sentences = _sentences(last.text, lang)
    settled, growing, growing_at = _settled_sentences(last.text + (" " if word_done else ""), sentences,
                                                      _codes_possible(lang, last.text))
    stable = sentences[:settled]
    chunks = pack(stable, planner.budget, planner.count_tokens) if stable else []
    for piece in chunks[:-1]:
        planner.add_chunk(last, piece, voice_name, chosen, lang)
    done = list(planner.pieces)
    if chunks:
        words = chunks[-1]
        rest = last.text[growing_at:]
        ahead = _join(words, rest)[len(words):] if rest else ""
    else:
        # (the last word written is whole when a space follows it: a mark that ends it is then a part's end)
        at_end = word_done and growing_at + len(growing) >= len(last.text)
        words = _known_words(growing + (" " if at_end else ""), planner.budget, planner.count_tokens)
        # (a space written after the last word is what follows the known words if the chunk goes on:
        # their last token is final without waiting for the next word)
        ahead = _after_part(words, (last.text + (" " if word_done else ""))[growing_at + len(words):])
    if not words or planner.lexicon is not None:
        return OpenPlan(done, None)
    chunk = planner.add_chunk(last, words, voice_name, chosen, lang, rewrite=False)
    pause = planner.pieces[-2] if len(planner.pieces) > 1 and isinstance(planner.pieces[-2], float) else 0.0
    return OpenPlan(done, chunk, pause, _regular_spacing(ahead))


def _after_part(words: str, rest: str) -> str:
    """What follows `words` in the text, as far as it is also what follows them in a chunk: after a
    mark a part may end, and packing joins the next to it with a space, or none between CJK."""
    if words and _is_cjk(words[-1]):   # (before isalnum: kana and hanzi are letters too)
        return rest if _is_cjk(rest[:1]) else ""
    if not words or words[-1].isalnum():
        return rest
    return rest if re.match(r" (\S|$)", rest) else ""


def _regular_spacing(text: str) -> str:
    """`text` up to where packing may write it otherwise: spacing other than one space (packing
    puts one between parts), or a mark (a sentence or a part may end after it, and the next begin
    with a space that the text has not)."""
    odd = re.search(r"\s\s|[^\S ]|[^\w\s]", text)
    text = text[:odd.start()] if odd else text
    for i, c in enumerate(text):   # (nor a space beside CJK, which packing joins without one)
        if c == " " and (_is_cjk(text[i - 1:i]) or _is_cjk(text[i + 1:i + 2])):
            return text[:i]
    return text   # (one space at most at its end: what packing puts after a word, whatever follows)


_PAIRS = {"(": ")", "«": "»", "“": "”", "‘": "’", "「": "」", "『": "』", "《": "》", "（": "）", "[": "]"}
_CLOSERS = set(_PAIRS.values())
_SAME = {'"', "'"}


def _quotes_settled_until(text: str) -> int:
    """Where the text's sentences stop being settled by its quotation marks and brackets: the whole
    text when every mark pairs up, nested, with something after the last, and each ' inside a word;
    else up to the first mark still open, or where a mark closes nothing, up to the first mark of
    all. (sentencex ends no sentence inside a pair, however long, and which marks pair is not known
    until they do.)"""
    opened: list[tuple[str, int]] = []   # (the mark that closes it, where it opened)
    first = None
    for i, c in enumerate(text):
        if c not in _SAME and c not in _PAIRS and c not in _CLOSERS:
            continue
        if c == "'" and 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum():
            continue   # (an apostrophe: don't)
        first = i if first is None else first
        if c == "'":   # (one that is not an apostrophe may open, close or be a word's: 'tis, the 90's)
            return opened[0][1] if opened else i
        if c in _SAME and opened and opened[-1][0] == c:
            if not text[i + 1:].strip():   # (a quote at the end may yet open one, by what follows)
                return opened[0][1]
            opened.pop()
        elif c in _SAME or c in _PAIRS:
            opened.append((_PAIRS.get(c, c), i))
        elif opened and c == opened[-1][0]:
            opened.pop()
        else:
            return first
    return opened[0][1] if opened else len(text)


# What may come next, for sentencex's view of the text so far: a word (Latin, digits, CJK), a full
# stop, and each mark that closes a quotation or bracket (sentencex ends no sentence inside a pair, however long, and
# reads a quotation mark as opening or closing by what is around it).
_NEXT = [" x", "x", " X", "X", "1", " 1", "我", " 我", ". X", ". x", "-x", "。x", "，x",
         *(q + t for q in "'\"”’»)）」』》]" for t in (" x", "x", ". X"))]


_sentences = lru_cache(maxsize=512)(split_sentences)   # (a live take plans its text again at every delta)
_SCRIPT_SEEN = 2000   # (sentences.language_code reads this much of a paragraph)
_WINDOW = 4   # sentences probed at the end: sentencex decides a boundary by what is near it (quotes aside)


def _codes_possible(language: str, text: str) -> list[str]:
    """sentencex's language for a paragraph, as sentences.language_code chooses it: the one now, then
    those later text may yet bring (for auto, the script most used in its first 2,000 characters)."""
    now = language_code(language, text)
    if (language and language != "auto") or len(text) >= _SCRIPT_SEEN or now == "ja":   # (kana: ja for good)
        return [now]
    return [now, *(code for code in ("zh", "ja", "ko", "ru") if code != now)]


def _settled_sentences(text: str, sentences: list[str], codes: list[str]) -> tuple[int, str, int]:
    """How many of `sentences` (of `text`) any continuation keeps as they are, the longest start of
    the next one that it keeps at its start, and where that one starts in `text`: what the quotation
    marks settle (above), and what sentencex keeps of it whatever comes next (_NEXT), in the language
    it reads the paragraph in now and in each it may read it in later (`codes`)."""
    limit, starts = _quotes_settled_until(text), []
    for sentence in sentences:
        starts.append(text.index(sentence, starts[-1] + len(sentences[len(starts) - 1]) if starts else 0))
    # (a sentence right before a mark in doubt may yet take it in, as its closing quotation mark)
    settled = sum(1 for s, start in zip(sentences[:-1], starts) if text[start + len(s):limit].strip())
    growing = sentences[settled][:max(0, limit - starts[settled])]
    growing_at = starts[settled]
    first = max(0, len(sentences) - _WINDOW)
    window = text[starts[first]:]
    for code, after in [*((codes[0], after) for after in _NEXT), *((code, "") for code in codes[1:])]:
        other = [*sentences[:first], *split_sentences(window + after, code=code)]
        same = first
        while same < min(settled, len(other)) and other[same] == sentences[same]:
            same += 1
        if same < settled:
            settled, growing, growing_at = same, sentences[same], starts[same]
        if same < len(other):
            growing = commonprefix([growing, other[same]])
    return settled, growing, growing_at


def _without_open_markup(text: str, cast: dict) -> str:
    """`text` up to what may still turn into markup: an unclosed tag (or a lone backslash) at the
    end, and a last line that may still begin with a dialogue turn of a name in `cast`."""
    i, open_at = 0, None
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 == len(text):
                open_at = i if open_at is None else open_at
            i += 2
            continue
        if c == "[" and open_at is None:
            open_at = i
        elif c == "]" or c == "\n":
            open_at = None
        i += 1
    if open_at is not None:
        text = text[:open_at]
    line_start = text.rfind("\n") + 1
    line = text[line_start:].lstrip(" \t").casefold()
    if line and any(f"{name.casefold()}:".startswith(line) for name in cast):
        text = text[:line_start]
    return text


def _known_words(sentence: str, budget: Budget, count_tokens) -> str:
    """The start of a sentence still being written that its chunk keeps however it ends. If it ends
    under the budget it is one piece; if not, sentences._cut splits it at its clause marks if it has
    any, else at its commas, else between words, and packs the parts greedily from the start. So the
    parts before the last mark of the loosest kind written so far (or, with no mark, the words
    before the last) open the chunk either way, as long as they fit together, written as they were
    where the text's own spacing is what packing would put between them."""
    tokens = count_tokens or (lambda s: 0)
    for mark in (_CLAUSE, _COMMA):
        bounds = [m.end() for m in mark.finditer(sentence)]
        if bounds:
            break
    else:
        # (each word with another after it: what ends the last word, a full stop or a quotation mark,
        # may yet be read as the end of the sentence or the start of the next; a run with no spaces
        # is halved at a length not known yet)
        bounds = [m.start() for m in re.finditer(" ", sentence)]
    for end in reversed(bounds):
        written = sentence[:end].strip()
        if written and len(written) <= budget.max_chars and tokens(written) <= budget.max_tokens:
            break
    else:
        return ""
    cuts = [0, *[b for b in bounds if b <= end]]
    parts = [p for p in (sentence[a:b].strip() for a, b in zip(cuts, cuts[1:])) if p]
    return commonprefix([written, reduce(_join, parts)]).rstrip()
