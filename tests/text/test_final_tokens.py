"""Text streamed in (an LLM's deltas, typing) gives exactly the tokens of the whole text, whatever the
split: engine/text/final_tokens.py hands out only ids no later text can change."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kazeia.engine import open_model
from kazeia.engine.synthesis.prompt import PromptBuilder
from kazeia.engine.text.final_tokens import FinalTokens

# what BPE and the split regex decide by what follows: words cut mid-way, spaces and newlines before
# the next word, digit runs, apostrophes ('s 're), punctuation runs, combining accents (NFC), CJK, emoji
PIECES = ["Hello", " world", "wor", "ld", " ", "  ", "\n", "\n\n", "12", "3", ".", ",", "!?", "'s", "'re", " don't",
          "e\u0301", "\u0301", "caf", "é", "日本", "語", "。", "😀", "-", "\t", "Ångström", " A", "a"]


@pytest.fixture(scope="module")
def builder(converted):
    return PromptBuilder(open_model(converted("custom_voice")))


def body_of(builder, text: str) -> list[int]:
    """The whole text's ids as the prompt reads them with streaming text: the first in the prompt,
    the rest one per frame, then tts_eos."""
    plan = builder.build(text, speaker="vivian", language="auto", streaming_text=True)
    return [plan.text_ids[-1]] + plan.trailing_text_ids[:-1]


def stream(builder, deltas: list[str]) -> tuple[list[int], list[list[int]]]:
    streamed = FinalTokens(builder.tok)
    handed = [streamed.push(d) for d in deltas]
    handed.append(streamed.close())
    return [i for ids in handed for i in ids], handed


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=24), st.data())
def test_any_split_gives_the_whole_texts_tokens(builder, pieces, data):
    text = "".join(pieces)
    if not text.strip():
        return   # (no tokens to speak: the engine refuses such a text whole or streamed)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    ids, _ = stream(builder, deltas)
    assert ids == body_of(builder, text), deltas


def test_words_are_handed_out_while_the_text_is_still_coming(builder):
    text = "The answer, written word by word: forty-two, then 3.14 and café au lait.\nDone."
    ids, handed = stream(builder, list(text))   # one character at a time
    assert ids == body_of(builder, text)
    assert sum(len(h) for h in handed[:-1]) >= len(ids) - 8   # all but the last few before the close
    assert not handed[0] and not handed[3]   # (nothing is final while the first word is being written)
    streamed = FinalTokens(builder.tok)
    streamed.push("Hello there")
    streamed.close()
    with pytest.raises(ValueError, match="closed"):
        streamed.push(" again")
