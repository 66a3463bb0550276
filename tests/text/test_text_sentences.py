"""Sentences and chunks: a multilingual corpus split where a reader would pause, never inside an
abbreviation, a decimal, a time, a URL or an e-mail address; chunks always under the budget."""
from __future__ import annotations

import pytest

from kazeia.engine.text.sentences import Budget, language_code, pack, split_sentences

# (language, text, the sentences it must give)
CORPUS = [
    ("english", 'Dr. Smith arrived at 10:30 a.m. on Jan. 5. He paid $3.50, e.g. for coffee! '
                'Visit https://example.com/a.b?x=1. Mail me at j.doe@mail.com. "Is it done?" she asked.',
     ["Dr. Smith arrived at 10:30 a.m. on Jan. 5.", "He paid $3.50, e.g. for coffee!",
      "Visit https://example.com/a.b?x=1.", "Mail me at j.doe@mail.com.", '"Is it done?" she asked.']),
    ("english", "Version 3.5 is out (see p. 12). Really?! Yes…",
     ["Version 3.5 is out (see p. 12).", "Really?!", "Yes…"]),
    ("french", "M. Dupont est arrivé à 10 h 30. Il a payé 3,50 €, c.-à-d. trop cher ! « Vraiment ? » dit-elle.",
     ["M. Dupont est arrivé à 10 h 30.", "Il a payé 3,50 €, c.-à-d. trop cher !", "« Vraiment ? » dit-elle."]),
    ("german", "Dr. Müller kam um 10:30 Uhr an, z. B. heute. Er zahlte 3,50 €. Ist das so? Ja.",
     ["Dr. Müller kam um 10:30 Uhr an, z. B. heute.", "Er zahlte 3,50 €.", "Ist das so?", "Ja."]),
    ("chinese", "今天天气很好。我们去公园吧！你说呢？“好的。”他说。价格是3.5元。",
     ["今天天气很好。", "我们去公园吧！", "你说呢？", "“好的。”他说。", "价格是3.5元。"]),
    ("japanese", "今日はいい天気です。公園に行きましょう！どう思いますか？「はい。」と彼は言った。",
     ["今日はいい天気です。", "公園に行きましょう！", "どう思いますか？", "「はい。」と彼は言った。"]),
    ("korean", "오늘은 날씨가 좋습니다. 공원에 갑시다! 어떻게 생각하세요? 네.",
     ["오늘은 날씨가 좋습니다.", "공원에 갑시다!", "어떻게 생각하세요?", "네."]),
]


@pytest.mark.parametrize("language, text, expected", CORPUS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CORPUS)])
def test_sentences_split_where_a_reader_would(language, text, expected):
    assert split_sentences(text, language) == expected
    # auto (no language) finds the same sentences from the script alone for the CJK texts
    if language in ("chinese", "japanese", "korean"):
        assert split_sentences(text, None) == expected


def test_auto_language_from_the_script():
    assert language_code(None, "今日はいい天気です。") == "ja"
    assert language_code("auto", "今天天气很好。") == "zh"
    assert language_code(None, "오늘은 날씨가 좋습니다.") == "ko"
    assert language_code(None, "Hello there.") == "en"
    assert language_code("french", "Hello") == "fr"


def test_chunks_pack_whole_sentences_under_the_budget():
    sentences = [f"Sentence number {i} is here." for i in range(20)]
    chunks = pack(sentences, Budget(max_chars=100, max_tokens=64))
    assert all(len(c) <= 100 for c in chunks)
    assert " ".join(chunks) == " ".join(sentences)   # nothing lost, nothing reordered
    assert len(chunks) == 7   # 27-28 characters a sentence, three to a chunk
    assert all(c.endswith(".") for c in chunks)      # cut between sentences only


def test_token_budget_counts_with_the_given_tokenizer():
    def words(s):
        return len(s.split())
    chunks = pack(["one two three.", "four five six.", "seven eight nine."], Budget(max_chars=1000, max_tokens=8),
                  count_tokens=words)
    assert chunks == ["one two three. four five six.", "seven eight nine."]


def test_a_long_sentence_is_cut_at_clauses_then_commas_then_words():
    sentence = ("The first part runs on for a while; the second part follows it: a list of things, "
                "apples, pears and plums, then the end")
    chunks = pack([sentence], Budget(max_chars=40, max_tokens=64))
    assert all(len(c) <= 40 for c in chunks)
    assert " ".join(chunks) == sentence
    assert chunks[0] == "The first part runs on for a while;"   # the clause mark, not the middle of a word
    assert any(c.endswith(",") for c in chunks)


def test_times_urls_and_decimal_commas_are_never_clause_marks():
    sentence = "Meet at 10:30 on https://example.org/x:y with 3,5 kilos and more words here to pad"
    chunks = pack([sentence], Budget(max_chars=30, max_tokens=64))
    assert all(len(c) <= 30 for c in chunks)
    assert any("10:30" in c for c in chunks) and any("https://example.org/x:y" in c for c in chunks)
    assert any("3,5" in c for c in chunks)


def test_cjk_without_marks_is_cut_and_joined_without_spaces():
    text = "今天天气很好" * 10
    chunks = pack([text], Budget(max_chars=16, max_tokens=64))
    assert all(len(c) <= 16 for c in chunks)
    assert "".join(chunks) == text
    assert pack(["你好。", "再见。"], Budget(max_chars=16, max_tokens=64)) == ["你好。再见。"]


def test_bad_budgets_are_named():
    with pytest.raises(ValueError, match="max_chars"):
        pack(["x"], Budget(max_chars=0))
    with pytest.raises(ValueError, match="max_tokens"):
        pack(["x"], Budget(max_tokens=-1))
