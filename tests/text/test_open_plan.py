"""The plan of a text still being written (engine/text/open_plan.py) never decides what the rest of
the text could change: at every prefix of a text, what is settled is the whole text's plan's first
pieces, and the open chunk's words start the whole text's chunk of that index (same voice, language,
seed, and the same pause before it). Texts hand-written as a language model writes, and random ones
made of every kind of piece the planner decides by (sentence ends, clause marks, commas, long words,
paragraphs, tags, dialogue turns, escapes, CJK, decimals, odd spacing), at budgets small enough that
sentences are cut."""
from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kazeia.engine.text.compose import Cast, Pauses, PlannedChunk, compose
from kazeia.engine.text.markup import MarkupError
from kazeia.engine.text.open_plan import compose_open
from kazeia.engine.text.sentences import Budget

CAST = {"Alice": Cast(speaker="serena"), "Bob Lee": Cast(instruct="A deep, slow voice.")}


def count_tokens(s: str) -> int:   # (a stand-in for the model's tokenizer: words and marks)
    return len(re.findall(r"\w+|[^\w\s]", s))


def args(budget: Budget) -> dict:
    return dict(default=Cast(speaker="vivian"), language="auto", cast=CAST, languages=["english", "french"],
                lexicon=None, budget=budget, pauses=Pauses(),
                seed=7, count_tokens=count_tokens)


def same_chunk(a: PlannedChunk, b: PlannedChunk) -> bool:
    return (a.index, a.written, a.voice_name, a.cast, a.language, a.seed, a.paragraph, a.at) == \
        (b.index, b.written, b.voice_name, b.cast, b.language, b.seed, b.paragraph, b.at)


def check_every_prefix(text: str, budget: Budget) -> int:
    """Every prefix's open plan against the whole text's plan; how many prefixes had a chunk begun."""
    try:
        whole = compose(text, **args(budget))
    except (MarkupError, ValueError):
        return 0
    begun = 0
    for end in range(1, len(text) + 1):
        part = compose_open(text[:end], **args(budget))
        settled = part.settled
        assert len(settled) <= len(whole.pieces)
        for got, want in zip(settled, whole.pieces):
            if isinstance(want, PlannedChunk):
                assert isinstance(got, PlannedChunk) and same_chunk(got, want) and got.text == want.text, \
                    (text[:end], got, want)
            else:
                assert got == want, (text[:end], got, want)
        assert not settled or isinstance(settled[-1], PlannedChunk)
        if part.open_chunk is None:
            continue
        begun += 1
        chunk = part.open_chunk
        want = whole.chunks[chunk.index]
        assert chunk.cast == want.cast and chunk.language == want.language and chunk.seed == want.seed
        assert want.text.startswith(chunk.text) and chunk.text, (text[:end], chunk.text, want.text)
        goes_on = chunk.text + part.ahead   # (the chunk ends where it is known, or goes on so)
        common = min(len(goes_on), len(want.text))
        assert goes_on[:common] == want.text[:common], (text[:end], goes_on, want.text)
        position = whole.pieces.index(want)
        before = whole.pieces[position - 1] if position and isinstance(whole.pieces[position - 1], float) else 0.0
        assert part.pause_before == before, (text[:end], part.pause_before, before)
        assert len(settled) == position - (1 if before else 0), (text[:end], "a chunk between")
    return begun


ANSWERS = [
    "Sure, here is what I found: the train leaves at 10:30, and it costs 3.50 euros. Dr. Smith will meet you there; "
    "bring your ticket.\n\nIf you miss it, the next one is at noon. Have a good trip!",
    "The short answer is yes. The long answer, which I will try to keep brief, is that it depends on three things: "
    "how large the model is, how fast your computer is, and how long the text is; all three matter.",
    "Alice: Bonjour ! [lang=french]Ça va ?\nBob Lee: Fine, thanks. [pause:500ms] And you?\n\nThe end.",
    "我们今天去公园，天气很好。然后我们吃了午饭，喝了茶；最后回家了。",
    "A word with \\[brackets\\] stays text. [voice=alice]Now Alice speaks, slowly, and clearly.  Two  spaces here.\n"
    "A line break inside a paragraph.",
    "supercalifragilisticexpialidociousandthensomemorelettersthatnevergiveaspace is one word, then more words.",
]


def test_every_prefix_of_an_answer_decides_only_what_the_whole_text_does():
    for budget in (Budget(), Budget(max_chars=40, max_tokens=12), Budget(max_chars=12, max_tokens=8)):
        for text in ANSWERS:
            check_every_prefix(text, budget)


def test_the_first_words_are_known_before_the_first_sentence_ends():
    """What a live take speaks at once: the start of the first sentence, before its end is written."""
    plan = compose_open("Sure, here is what I found about the train", **args(Budget()))
    assert plan.open_chunk is not None and plan.open_chunk.text == "Sure,"
    plan = compose_open("The train leaves at ten and costs very little", **args(Budget()))
    assert plan.open_chunk.text == "The train leaves at ten and costs very"   # ("little" may go on)
    plan = compose_open("The train leaves at ten and costs very little ", **args(Budget()))
    assert plan.open_chunk.text == "The train leaves at ten and costs very little"   # (a space ended it)
    plan = compose_open("Sure, ", **args(Budget()))   # (known at once: the first audio waits for no next word)
    assert plan.open_chunk.text == "Sure," and plan.ahead == " "
    plan = compose_open("One sentence. Another one is being writ", **args(Budget()))
    assert plan.open_chunk.text == "One sentence." and not plan.settled
    assert compose_open("<speak>Hello there.</speak> ", **args(Budget())).open_chunk is None
    # (the tag may go on, but whatever it becomes, the chunk before it keeps "Hello.")
    assert compose_open("Hello. [pause:1", **args(Budget())).open_chunk.text == "Hello."
    assert compose_open("Hello [pause:1", **args(Budget())).open_chunk.text == "Hello"
    assert compose_open("Hello. [pause:1s] ", **args(Budget())).settled[0].text == "Hello."
    assert compose_open("Ali", **args(Budget())).open_chunk is None   # (maybe "Alice: ...")


PIECES = ["Hello", " world", " the", " train", ".", ". ", "! ", "? ", ", ", "; ", ": ", " and", " then", "3", ".5",
          " Dr. Smith", " e.g. this", "\n", "\n\n", "  ", " [pause:300ms] ", "[voice=alice]", "[lang=french]",
          "\nAlice: ", "\nBob Lee: ", "\\[", "verylongwordwithnospacesatallinit", "，", "。", "我们", "公园", " A",
          " it", "10:30", " https://x.org/a", "'s", "-", " ok", '"', " '", "' ", " (", ") ", "«", "»", "“", "”", " Привет", "カナ", " 안녕"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=40), st.sampled_from([(12, 8), (30, 10), (60, 64)]))
def test_random_texts_at_every_prefix(parts, budget):
    check_every_prefix("".join(parts), Budget(max_chars=budget[0], max_tokens=budget[1]))


def test_with_a_lexicon_a_chunk_begins_once_all_its_words_are_known():
    """A rule may span what follows (New York), so with a lexicon a chunk is spoken once settled,
    rewritten as the whole text's plan rewrites it."""
    from kazeia.engine.text.lexicon import Lexicon
    lexicon = Lexicon.from_rules_text("term,say\nNew York,Noo Yawk\nharbour,harbor\n")
    text = "We land in New York at noon. Then the harbour, the bridge and the park.\n\nThe end."
    with_lexicon = {**args(Budget(max_chars=40, max_tokens=12)), "lexicon": lexicon}
    whole = compose(text, **with_lexicon)
    assert [c.rewrites != [] for c in whole.chunks][:2] == [True, True]
    for end in range(1, len(text) + 1):
        part = compose_open(text[:end], **with_lexicon)
        assert part.open_chunk is None
        for got, want in zip(part.settled, whole.pieces):
            assert got == want if isinstance(want, float) else (got.text, got.rewrites) == (want.text, want.rewrites)
    assert compose_open("We land in New", **with_lexicon).settled == []
