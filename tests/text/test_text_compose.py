"""A text as a plan: chunks in order with their voice, language and seed, pauses from the markup or
from punctuation, names and languages checked against what the request and model have."""
from __future__ import annotations

import pytest

from kazeia.engine.text.compose import Cast, Pauses, PlannedChunk, chunk_seed, compose
from kazeia.engine.text.lexicon import Lexicon
from kazeia.engine.text.markup import MarkupError
from kazeia.engine.text.sentences import Budget

ME = Cast(speaker="vivian")
CAST = {"Alice": Cast(speaker="serena"), "Bob": Cast(instruct="A deep, slow voice.")}
LANGUAGES = ["english", "french", "chinese"]


def pieces(plan):
    return [(p.text, p.voice_name, p.language) if isinstance(p, PlannedChunk) else p for p in plan.pieces]


def test_plain_short_text_is_one_chunk_with_the_request_seed():
    plan = compose("Hello there.", default=ME, seed=1234)
    assert pieces(plan) == [("Hello there.", None, "auto")]
    assert plan.chunks[0].seed == 1234 and plan.chunks[0].cast == ME


def test_pauses_from_punctuation_and_markup_and_paragraphs():
    text = "One. Two.\n\nThree. [pause:2s] Four. [pause:300ms][pause:200ms] Five."
    plan = compose(text, default=ME, budget=Budget(max_chars=8), pauses=Pauses(sentence_ms=100, paragraph_ms=700))
    assert pieces(plan) == [("One.", None, "auto"), 100.0, ("Two.", None, "auto"), 700.0, ("Three.", None, "auto"),
                            2000.0, ("Four.", None, "auto"), 500.0, ("Five.", None, "auto")]
    assert [c.paragraph for c in plan.chunks] == [0, 0, 1, 1, 1]
    assert [c.index for c in plan.chunks] == [0, 1, 2, 3, 4]


def test_dialogue_and_voice_tags_pick_the_cast_and_languages():
    text = "Alice: Bonjour. [lang=french]Ça va ?\nBob: Fine.\n\nThe end. [voice=alice]Bye."
    plan = compose(text, default=ME, cast=CAST, languages=LANGUAGES, language="english")
    assert pieces(plan) == [("Bonjour.", "Alice", "english"), 150.0, ("Ça va ?", "Alice", "french"), 150.0,
                            ("Fine.", "Bob", "english"), 600.0, ("The end.", None, "english"), 150.0,
                            ("Bye.", "Alice", "english")]
    assert plan.chunks[2].cast == CAST["Bob"] and plan.chunks[4].cast == CAST["Alice"] and plan.chunks[0].cast == CAST["Alice"]


def test_unknown_voice_and_language_errors_point_at_the_tag():
    with pytest.raises(MarkupError, match=r"^line 2, column 13: unknown voice 'carol'.*Alice, Bob"):
        compose("Hello.\nThen [voice=carol] hi.", default=ME, cast=CAST)
    with pytest.raises(MarkupError, match=r"^line 1, column 14: unknown language 'klingon'.*english"):
        compose("Hello. [lang=klingon] hi.", default=ME, languages=LANGUAGES)


def test_chunk_seeds_are_derived_and_distinct():
    plan = compose("One. Two. Three. Four.", default=ME, budget=Budget(max_chars=8), seed=7)
    seeds = [c.seed for c in plan.chunks]
    assert seeds[0] == 7 and len(set(seeds)) == 4
    assert seeds == [chunk_seed(7, i) for i in range(4)]
    assert chunk_seed(8, 1) != chunk_seed(7, 1) and all(0 <= s < 2 ** 64 for s in seeds)
    again = plan.reseeded(2, 99)
    assert [c.seed for c in again.chunks] == [seeds[0], seeds[1], 99, seeds[3]]
    with pytest.raises(ValueError, match="no chunk 9"):
        plan.reseeded(9, 1)


def test_lexicon_rewrites_are_applied_per_chunk_and_recorded():
    lexicon = Lexicon.from_rules_text("term,say,language\nKazeia,ka-ZAY-ah,\nbonjour,bon-ZHOOR,english\n")
    plan = compose("Kazeia says bonjour. [lang=french]Kazeia dit bonjour.", default=ME, lexicon=lexicon,
                   languages=LANGUAGES, language="english", budget=Budget(max_chars=24))
    assert [c.text for c in plan.chunks] == ["ka-ZAY-ah says bon-ZHOOR.", "ka-ZAY-ah dit bonjour."]
    assert [c.written for c in plan.chunks] == ["Kazeia says bonjour.", "Kazeia dit bonjour."]
    assert [[r.replacement for r in c.rewrites] for c in plan.chunks] == [["ka-ZAY-ah", "bon-ZHOOR"], ["ka-ZAY-ah"]]


@pytest.mark.parametrize("text, says", [("", "empty"), ("   \n\n ", "empty"), ("[pause:1s]", "no words")])
def test_nothing_to_say_is_an_error(text, says):
    with pytest.raises(ValueError, match=says):
        compose(text, default=ME)


def test_bad_pause_settings_are_named():
    with pytest.raises(ValueError, match="paragraph_ms"):
        compose("Hi.", default=ME, pauses=Pauses(paragraph_ms=-1))
