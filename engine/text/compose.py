"""A text as a plan of chunks and pauses: markup parsed, voices and languages resolved (errors at
their line and column), paragraphs split into sentences and packed under a budget, pronunciation
rules applied, each chunk given its own seed. The plan is what every front end runs (say, render,
the workbench, the server), so one text gives the same audio whichever asked for it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .lexicon import Lexicon
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
    pauses.validate()
    budget.validate()
    cast = dict(cast or {})
    by_fold = {name.casefold(): name for name in cast}
    known_languages = {lang.lower() for lang in languages}
    if not text.strip():
        raise ValueError("the text is empty: nothing to say")
    pieces: list = []
    pending_pause: float | None = None   # the next join's silence, if markup said so
    paragraph = 0
    for item in parse(text, cast.keys()):
        if isinstance(item, Pause):
            pending_pause = (pending_pause or 0.0) + item.ms
            continue
        if isinstance(item, Paragraph):
            paragraph += 1
            if pieces and pending_pause is None:
                pending_pause = pauses.paragraph_ms
            continue
        voice_name, chosen = _voice_of(item, by_fold, cast, default)
        lang = _language_of(item, language, known_languages)
        for piece in pack(split_sentences(item.text, lang), budget, count_tokens):
            if pieces:
                _add_pause(pieces, pauses.sentence_ms if pending_pause is None else pending_pause)
            pending_pause = None
            index = sum(isinstance(p, PlannedChunk) for p in pieces)
            # a lexicon's voice scope: the name the text used, else the request's speaker
            spoken, rewrites = (lexicon.apply(piece, lang, voice_name or chosen.speaker) if lexicon is not None
                                else (piece, []))
            pieces.append(PlannedChunk(index, spoken, piece, item.at, voice_name, chosen, lang,
                                       chunk_seed(seed, index), rewrites, paragraph))
    if pending_pause and pieces:   # a pause the text ends with is kept (a take may be followed by another)
        _add_pause(pieces, pending_pause)
    if not any(isinstance(p, PlannedChunk) for p in pieces):
        raise ValueError("the text has markup but no words to say")
    return Composition(pieces)


def _add_pause(pieces: list, ms: float) -> None:
    if ms > 0:
        pieces.append(float(ms))


def _voice_of(item: Speech, by_fold: dict, cast: dict, default: Cast) -> tuple[str | None, Cast]:
    if item.voice is None:
        return None, default
    name = by_fold.get(item.voice.casefold())
    if name is None:
        at = item.voice_at or item.at
        known = ", ".join(sorted(cast)) or "none (give the request a cast)"
        raise MarkupError(at.line, at.column, f"unknown voice {item.voice!r}; the names this text may use: {known}")
    return name, cast[name]


def _language_of(item: Speech, language: str, known: set[str]) -> str:
    if item.language is None:
        return (language or "auto").lower()
    if known and item.language != "auto" and item.language not in known:
        at = item.language_at or item.at
        raise MarkupError(at.line, at.column, f"unknown language {item.language!r}; the model speaks: auto, "
                                              f"{', '.join(sorted(known))}")
    return item.language
