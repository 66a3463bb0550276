"""The pronunciation lexicon: whole-word matching, case, scope and precedence, a single pass, CJK,
the Rewrite records, the two file formats and their errors, merging."""
import pytest

from kazeia.engine.text.lexicon import Lexicon, LexiconError, Rewrite, Rule


def lex(*rules: Rule) -> Lexicon:
    return Lexicon.from_rules(list(rules))


def said(lexicon: Lexicon, text: str, language=None, voice=None) -> str:
    return lexicon.apply(text, language, voice)[0]


def write(tmp_path, name: str, text: str, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return path


# --- matching ---------------------------------------------------------------------------------

def test_whole_word_only():
    sql = lex(Rule("SQL", "sequel"))
    assert said(sql, "SQL, SQL's MySQL SQLite (SQL)") == "sequel, sequel's MySQL SQLite (sequel)"
    assert said(sql, "NoSQL SQL_x SQL2 SQLe\u0301") == "NoSQL SQL_x SQL2 SQLe\u0301"   # the mark is part of the word


def test_terms_with_non_word_edges():
    rules = lex(Rule("C++", "see plus plus"), Rule(".NET", "dot net"))
    assert (said(rules, "C++ and C++11; .NET, ASP.NET and .NETting.")
            == "see plus plus and C++11; dot net, ASP.NET and .NETting.")


def test_case_sensitive_is_the_default_and_insensitive_matches_any_case():
    assert Rule("US", "you ess").case == "sensitive"
    sensitive = lex(Rule("US", "you ess"))
    assert said(sensitive, "the US and us and Us") == "the you ess and us and Us"
    insensitive = lex(Rule("kazeia", "ka-ZAY-ah", case="insensitive"))
    assert said(insensitive, "Kazeia KAZEIA kazeia") == "ka-ZAY-ah ka-ZAY-ah ka-ZAY-ah"
    # both for one term: the exact spelling wins where it matches
    both = lex(Rule("sql", "S Q L", case="insensitive"), Rule("SQL", "sequel"))
    assert said(both, "SQL Sql") == "sequel S Q L"


def test_language_scope_and_auto():
    rules = lex(Rule("Paris", "pa-REE", language="French"), Rule("Kazeia", "ka-ZAY-ah"))
    assert said(rules, "Paris Kazeia", "french") == "pa-REE ka-ZAY-ah"
    assert said(rules, "Paris Kazeia", "English") == "Paris ka-ZAY-ah"
    for unknown in ("auto", None):   # the language unknown: only the rules for every language
        assert said(rules, "Paris Kazeia", unknown) == "Paris ka-ZAY-ah"


def test_voice_scope():
    rules = lex(Rule("tomato", "to-MAH-to", voice="Vivian"))
    assert said(rules, "tomato", voice="vivian") == "to-MAH-to"   # names compared ignoring case
    assert said(rules, "tomato", voice="ryan") == "tomato"
    assert said(rules, "tomato", voice=None) == "tomato"


def test_more_specific_scope_wins():
    rules = lex(Rule("data", "global"), Rule("data", "lang", language="english"),
                Rule("data", "voice", voice="vivian"), Rule("data", "both", language="english", voice="vivian"))
    assert said(rules, "data", "english", "vivian") == "both"
    assert said(rules, "data", "french", "vivian") == "voice"
    assert said(rules, "data", "english", "ryan") == "lang"
    assert said(rules, "data", "auto", None) == "global"


def test_longest_term_first():
    rules = lex(Rule("New York", "noo york"), Rule("New York City", "the big apple"))
    assert (said(rules, "New York City, New York, New\u00a0York  City")
            == "the big apple, noo york, the big apple")


def test_a_rewrite_is_not_rewritten_again():
    rules = lex(Rule("SQL", "sequel server"), Rule("sequel", "WRONG"), Rule("a", "b"), Rule("b", "c"))
    assert said(rules, "SQL a b") == "sequel server b c"
    assert said(rules, "sequel") == "WRONG"   # the second rule does work on its own


def test_cjk_terms_match_as_substrings():
    rules = lex(Rule("北京", "Běijīng"), Rule("SQL", "sequel"), Rule("東京", "とうきょう", language="japanese"))
    assert said(rules, "我爱北京天安门") == "我爱Běijīng天安门"
    assert said(rules, "私はSQLが好き、MySQLも") == "私はsequelが好き、MySQLも"   # CJK beside Latin is a boundary
    assert said(rules, "東京都", "japanese") == "とうきょう都"


def test_rewrites_record_matched_text_offsets_and_sources(tmp_path):
    path = write(tmp_path, "lex.toml", '[[rule]]\nterm = "SQL"\nsay = "sequel"\n\n'
                                       '[[rule]]\nterm = "kazeia"\nsay = "ka-ZAY-ah"\ncase = "insensitive"\n')
    text = "Hi KAZEIA, SQL or kazeia."
    spoken, rewrites = Lexicon.load(path).apply(text, "english", None)
    assert spoken == "Hi ka-ZAY-ah, sequel or ka-ZAY-ah."
    assert rewrites == [Rewrite("KAZEIA", "ka-ZAY-ah", 3, f"{path}:5"), Rewrite("SQL", "sequel", 11, f"{path}:1"),
                        Rewrite("kazeia", "ka-ZAY-ah", 18, f"{path}:5")]
    assert all(text[r.start:r.end] == r.term for r in rewrites)
    assert lex(Rule("SQL", "x")).apply("no match", None, None) == ("no match", [])


# --- files ------------------------------------------------------------------------------------

TOML = """# pronunciations
[[rule]]
term = "Kazeia"
say = "ka-ZAY-ah"
case = "insensitive"

[[rule]]
term = "Paris"
say = "pa-REE"
language = "french"
voice = "vivian"
"""
CSV = """term,say,case,language,voice
Kazeia,ka-ZAY-ah,insensitive,,
Paris,pa-REE,,french,vivian
"""


def test_toml_and_csv_load_the_same_rules(tmp_path):
    toml, csv = Lexicon.load(write(tmp_path, "a.toml", TOML)), Lexicon.load(write(tmp_path, "b.csv", CSV))
    fields = lambda lexicon: [(r.term, r.say, r.case, r.language, r.voice) for r in lexicon.rules]
    assert fields(toml) == fields(csv) == [("Kazeia", "ka-ZAY-ah", "insensitive", None, None),
                                           ("Paris", "pa-REE", "sensitive", "french", "vivian")]
    assert len(toml) == len(csv) == 2
    assert [r.source for r in toml.rules] == [f"{tmp_path / 'a.toml'}:2", f"{tmp_path / 'a.toml'}:7"]
    assert [r.source for r in csv.rules] == [f"{tmp_path / 'b.csv'}:2", f"{tmp_path / 'b.csv'}:3"]
    for lexicon in (toml, csv):
        assert said(lexicon, "KAZEIA in Paris", "french", "Vivian") == "ka-ZAY-ah in pa-REE"


def test_csv_with_only_the_required_columns_and_a_byte_order_mark(tmp_path):
    lexicon = Lexicon.load(write(tmp_path, "l.csv", "\ufeffSay,Term\nsequel,SQL\n\n"))
    assert [(r.term, r.say, r.case) for r in lexicon.rules] == [("SQL", "sequel", "sensitive")]


def test_rules_from_text():
    lexicon = Lexicon.from_rules_text(TOML, "toml", "mine")
    assert [r.source for r in lexicon.rules] == ["mine:2", "mine:7"]
    assert Lexicon.from_rules_text(CSV).rules[1].source == "<text>:3"   # csv by default
    with pytest.raises(LexiconError, match="mine: unknown lexicon format 'yaml'"):
        Lexicon.from_rules_text("", "yaml", "mine")


RULE = '[[rule]]\nterm = "SQL"\nsay = "sequel"\n'


@pytest.mark.parametrize("name, content, where, words", [
    ("l.toml", RULE + '\n[[rule]]\nterm = ""\nsay = "x"\n', "l.toml:5 (rule 2)", ["term is empty"]),
    ("l.toml", RULE + '\n[[rule]]\nterm = "   "\nsay = "x"\n', "l.toml:5 (rule 2)", ["only white space"]),
    ("l.toml", '[[rule]]\nterm = "SQL"\nsay = ""\n', "l.toml:1 (rule 1, term 'SQL')", ["'say' is empty"]),
    ("l.toml", RULE + 'case = "loose"\n', "l.toml:1 (rule 1, term 'SQL')", ["'loose'", "sensitive, insensitive"]),
    ("l.toml", RULE + 'lang = "english"\n', "l.toml:1 (rule 1, term 'SQL')",
     ["'lang'", "term, say, case, language, voice"]),
    ("l.toml", '[[rule]]\nterm = "SQL"\n', "l.toml:1 (rule 1, term 'SQL')", ["missing 'say'"]),
    ("l.toml", RULE + "\n" + RULE, "l.toml:5", ["duplicate", "'SQL'", "l.toml:1"]),
    ("l.toml", '[[rule]]\nterm = SQL\n', "l.toml:2", ["TOML syntax error"]),
    ("l.toml", '[[rules]]\nterm = "SQL"\nsay = "x"\n', "l.toml", ["'rules'", "[[rule]]"]),
    ("l.toml", '[[rule]]\nterm = "caf\xe9"\nsay = "x"\n'.encode("latin-1"), "l.toml:2", ["not UTF-8"]),
    ("l.csv", "word,say\nSQL,sequel\n", "l.csv:1", ["'word'", "allowed"]),
    ("l.csv", "say\nsequel\n", "l.csv:1", ["missing column(s) 'term'"]),
    ("l.csv", "term,case\nSQL,sensitive\n", "l.csv:1", ["missing column(s) 'say'"]),
    ("l.csv", "term,say,case\nSQL,sequel,\nMySQL,my sequel,exact\n", "l.csv:3 (term 'MySQL')",
     ["'exact'", "sensitive, insensitive"]),
    ("l.csv", "term,say\n  ,sequel\n", "l.csv:2", ["only white space"]),
    ("l.csv", "term,say\nSQL,\n", "l.csv:2 (term 'SQL')", ["'say' is empty"]),
    ("l.csv", 'term,say\n"S\nQL",x\nSQL,a\nSQL,b\n', "l.csv:5", ["duplicate", "l.csv:4"]),
    ("l.csv", "term,say\nSQL,sequel,extra\n", "l.csv:2", ["3 cells"]),
    ("l.json", "{}", "l.json", [".toml or a .csv"]),
])
def test_bad_lexicon_files_name_the_file_and_place(tmp_path, name, content, where, words):
    path = write(tmp_path, name, content)
    with pytest.raises(LexiconError) as caught:
        Lexicon.load(path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / where}"), message
    for word in words:
        assert word in message, message


def test_a_missing_file(tmp_path):
    with pytest.raises(LexiconError, match="nothere.toml: no such file"):
        Lexicon.load(tmp_path / "nothere.toml")


def test_rules_built_in_code_are_checked_too():
    with pytest.raises(LexiconError, match="sensitive, insensitive"):
        Rule("SQL", "sequel", case="maybe")
    with pytest.raises(LexiconError, match="language 'auto' never applies"):
        Rule("SQL", "sequel", language="auto")
    with pytest.raises(LexiconError, match="duplicate"):
        lex(Rule("kazeia", "a", case="insensitive"), Rule("KAZEIA", "b", case="insensitive"))


def test_merge_later_overrides_same_term_and_scope(tmp_path):
    base = Lexicon.load(write(tmp_path, "base.csv", "term,say,language\nSQL,sequel,\nSQL,ess queue ell,english\n"
                                                    "Kazeia,ka-ZAY-ah,\n"))
    mine = Lexicon.load(write(tmp_path, "mine.toml", '[[rule]]\nterm = "SQL"\nsay = "squeal"\n'))
    merged = base.merge(mine)
    assert len(merged) == 3 and len(base) == 3   # base itself is unchanged
    spoken, rewrites = merged.apply("SQL Kazeia", None, None)
    assert spoken == "squeal ka-ZAY-ah"
    assert rewrites[0].source == f"{tmp_path / 'mine.toml'}:1"
    assert said(merged, "SQL", "english") == "ess queue ell"   # another scope: not overridden
    assert said(base, "SQL") == "sequel"
