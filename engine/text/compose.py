"""A text as a plan of chunks and pauses: markup parsed, voices and languages resolved (errors at
their line and column), paragraphs split into sentences and packed under a budget, pronunciation
rules applied, each chunk given its own seed. The plan is what every front end runs (say, render,
the workbench, the server), so one text gives the same audio whichever asked for it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .lexicon import Lexicon
from .limits import MAX_PAUSE_RUN_MS, MAX_TOTAL_PAUSE_MS
from .markup import MarkupError, Paragraph, Pause, Position, Speech, parse
from .sentences import Budget, pack, split_sentences

_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class Cast:
    """What one voice name means: a CustomVoice speaker, a VoiceDesign instruction, a voice profile
    (an engine Voice), or several of these (a 1.7B CustomVoice speaker with an instruction)."""
    speaker: str | None = None
    instruct: str | None = None
    voice: object | None = None   # kazeia.engine.Voice (kept loose: this module knows no engine)
    profile: str | None = None    # where the voice profile came from, for records


@dataclass(frozen=True)
class Pauses:
    """Silence put between chunks where the markup asks for none: after a sentence and at a paragraph
    break. A pause in the markup takes the place of these."""
    sentence_ms: float = 150.0
    paragraph_ms: float = 600.0

    def validate(self) -> None:
        for name in ("sentence_ms", "paragraph_ms"):
            value = getattr(self, name)
            if not 0 <= value <= 60_000:
                raise ValueError(f"{name} must be from 0 to 60000 ms, got {value!r}")


@dataclass
class PlannedChunk:
    index: int
    text: str              # what is spoken (pronunciation rules applied)
    written: str           # as written in the text
    at: Position
    voice_name: str | None  # None: the request's own voice
    cast: Cast
    language: str
    seed: int
    rewrites: list = field(default_factory=list)   # lexicon.Rewrite of this chunk
    paragraph: int = 0


@dataclass
class Composition:
    """Chunks and pauses in order: `pieces` holds PlannedChunk and float (ms of silence)."""
    pieces: list

    @property
    def chunks(self) -> list[PlannedChunk]:
        return [p for p in self.pieces if isinstance(p, PlannedChunk)]

    def reseeded(self, index: int, seed: int) -> "Composition":
        """The same plan with chunk `index` given another seed (regenerating one chunk)."""
        pieces = [PlannedChunk(**{**vars(p), "seed": seed}) if isinstance(p, PlannedChunk) and p.index == index
                  else p for p in self.pieces]
        if not any(isinstance(p, PlannedChunk) and p.index == index for p in self.pieces):
            raise ValueError(f"no chunk {index}: the plan has chunks 0 to {len(self.chunks) - 1}")
        return Composition(pieces)


def chunk_seed(seed: int, index: int) -> int:
    """Chunk `index`'s seed: the request's own for the first chunk (a short text sounds as it did
    without the front end), a SplitMix64 mix of both for the others (neighbouring seeds and indices
    give unrelated streams)."""
    if index == 0:
        return seed
    z = (seed + index * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def compose(text: str, *, default: Cast, language: str = "auto", cast: dict[str, Cast] | None = None,
            languages=(), lexicon: Lexicon | None = None, budget: Budget = Budget(), pauses: Pauses = Pauses(),
            seed: int = 0, count_tokens: Callable[[str], int] | None = None) -> Composition:
    """`text` as a plan. `default`: the request's own voice; `cast`: the names [voice=NAME] and
    dialogue turns may use; `languages`: the model's (checked for [lang=...]); `count_tokens`: the
    model tokenizer's count, for the budget."""
    if not text.strip():
        raise ValueError("the text is empty: nothing to say")
    planner = _Planner(default, language, cast, languages, lexicon, budget, pauses, seed, count_tokens)
    for item in parse(text, planner.cast.keys()):
        planner.add(item)
    return planner.finish()


class _Planner:
    """The plan built item by item (compose), or up to what is settled (compose_open)."""

    def __init__(self, default: Cast, language: str, cast: dict[str, Cast] | None, languages, lexicon: Lexicon | None,
                 budget: Budget, pauses: Pauses, seed: int, count_tokens: Callable[[str], int] | None):
        pauses.validate()
        budget.validate()
        self.default, self.language, self.lexicon, self.budget, self.pauses = default, language, lexicon, budget, pauses
        self.seed, self.count_tokens = seed, count_tokens
        self.cast = dict(cast or {})
        self.by_fold = {name.casefold(): name for name in self.cast}
        self.known_languages = {lang.lower() for lang in languages}
        self.pieces: list = []
        self.pending_pause: float | None = None   # the next join's silence, if markup said so
        self.markup_pause = 0.0                   # ms of silence the markup asked for so far
        self.paragraph = 0

    def add(self, item, sentences: list[str] | None = None) -> None:
        """One parsed item; `sentences`: a Speech item's sentences, when not all of its own."""
        if isinstance(item, Pause):
            # checked here, not when the take is joined after every chunk is made
            self.pending_pause = (self.pending_pause or 0.0) + item.ms
            if self.pending_pause > MAX_PAUSE_RUN_MS:
                raise MarkupError(item.at.line, item.at.column, f"pauses in a row add up to {self.pending_pause / 1000:g} s, "
                                                                f"over the limit of {MAX_PAUSE_RUN_MS / 1000:g} s")
            self.markup_pause += item.ms
            if self.markup_pause > MAX_TOTAL_PAUSE_MS:
                raise MarkupError(item.at.line, item.at.column, f"the text's pauses add up to over "
                                                                f"{MAX_TOTAL_PAUSE_MS / 3_600_000:g} h, the limit")
            return
        if isinstance(item, Paragraph):
            self.paragraph += 1
            if self.pieces and self.pending_pause is None:
                self.pending_pause = self.pauses.paragraph_ms
            return
        voice_name, chosen = self.voice_of(item)
        lang = self.language_of(item)
        if sentences is None:
            sentences = split_sentences(item.text, lang)
        for piece in pack(sentences, self.budget, self.count_tokens):
            self.add_chunk(item, piece, voice_name, chosen, lang)

    def add_chunk(self, item: Speech, piece: str, voice_name: str | None, chosen: Cast, lang: str,
                  rewrite: bool = True) -> PlannedChunk:
        self.add_pause()
        index = sum(isinstance(p, PlannedChunk) for p in self.pieces)
        # a lexicon's voice scope: the name the text used, else the request's speaker
        spoken, rewrites = (self.lexicon.apply(piece, lang, voice_name or chosen.speaker)
                            if self.lexicon is not None and rewrite else (piece, []))
        chunk = PlannedChunk(index, spoken, piece, item.at, voice_name, chosen, lang, chunk_seed(self.seed, index),
                             rewrites, self.paragraph)
        self.pieces.append(chunk)
        return chunk

    def add_pause(self) -> None:
        """The silence before the next chunk: the markup's, else a sentence's (none before the first)."""
        if self.pieces:
            _add_pause(self.pieces, self.pauses.sentence_ms if self.pending_pause is None else self.pending_pause)
        self.pending_pause = None

    def finish(self) -> Composition:
        if self.pending_pause and self.pieces:   # a pause the text ends with is kept (a take may be followed by another)
            _add_pause(self.pieces, self.pending_pause)
        if not any(isinstance(p, PlannedChunk) for p in self.pieces):
            raise ValueError("the text has markup but no words to say")
        return Composition(self.pieces)

    def voice_of(self, item: Speech) -> tuple[str | None, Cast]:
        if item.voice is None:
            return None, self.default
        name = self.by_fold.get(item.voice.casefold())
        if name is None:
            at = item.voice_at or item.at
            known = ", ".join(sorted(self.cast)) or "none (give the request a cast)"
            raise MarkupError(at.line, at.column, f"unknown voice {item.voice!r}; the names this text may use: {known}")
        return name, self.cast[name]

    def language_of(self, item: Speech) -> str:
        if item.language is None:
            return (self.language or "auto").lower()
        if self.known_languages and item.language != "auto" and item.language not in self.known_languages:
            at = item.language_at or item.at
            raise MarkupError(at.line, at.column, f"unknown language {item.language!r}; the model speaks: auto, "
                                                  f"{', '.join(sorted(self.known_languages))}")
        return item.language


def _add_pause(pieces: list, ms: float) -> None:
    if ms > 0:
        pieces.append(float(ms))
