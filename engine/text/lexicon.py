"""Pronunciation rules, `term -> respelling`, applied to the text before it is tokenised, so an
operator can fix how a product name or a word is said. Rules come from a `.toml` file:

    [[rule]]
    term = "Kazeia"
    say = "ka-ZAY-ah"
    case = "insensitive"   # "sensitive" (the default) or "insensitive"
    language = "english"   # optional: only for text in this language; omitted: every language
    voice = "vivian"       # optional: only for this voice; omitted: every voice

or a `.csv` file with a header row `term,say,case,language,voice` (case, language and voice columns
optional; an empty cell is the default).

Matching:
- whole words only: a match is neither preceded nor followed by a letter, digit or underscore, so
  "SQL" rewrites "SQL" and "SQL's" but not "MySQL" or "SQLite", and "C++" / ".NET" (which begin or
  end with a non-word character, where `\\b` would fail) work too. CJK text has no spaces, so a side
  of a term that is a CJK character (Han, kana, Hangul) matches as a substring, and a CJK character
  next to a Latin term counts as a boundary ("私はSQLが" rewrites SQL). Spaces inside a term match any
  run of white space ("New York" matches "New\\u00a0York").
- case "sensitive" matches the term as written; "insensitive" matches it in any case (re.IGNORECASE,
  Unicode simple case folding).
- scope: a rule applies when its language is unset or equals the request's, and its voice is unset
  or equals the request's (both compared ignoring case). A request language of None or "auto"
  applies only the rules without a language (the text's language is not known); a request voice of
  None applies only the rules without a voice.
- precedence, where rules could match at the same place: the more specific scope first (voice and
  language > voice > language > every), then the longer term ("New York City" before "New York"),
  then a case-sensitive rule before an insensitive one. The text is scanned once, left to right, so
  a rewritten span (and what it was rewritten to) is never rewritten again.

Terms and respellings are NFC-normalised; the text is expected in NFC (as typed text nearly always is).
The same term (exactly, or folded for an insensitive rule) with the same case mode, language and
voice is one rule: twice in one file is an error, and `merge` lets a later lexicon override it."""
from __future__ import annotations

import csv
import io
import os
import re
import tomllib
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from .limits import MAX_LEXICON_FILE_BYTES

CASES = ("sensitive", "insensitive")
DEFAULT_CASE = "sensitive"
FIELDS = ("term", "say", "case", "language", "voice")   # TOML keys and CSV columns
AUTO = "auto"

# Scripts written without spaces between words: a term's side in one of these has no word boundary,
# and a character of these beside a term is a boundary. Han (with extensions and compatibility
# ideographs, 々〆〇), kana (with half-width), Hangul (syllables and jamo), Bopomofo.
_CJK = ("\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3040-\u30ff\u3100-\u312f\u3130-\u318f\u31a0-\u31bf"
        "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f"
        "\U00020000-\U0003134f")
_CJK_CHAR = re.compile(f"[{_CJK}]")
_TOML_RULE_HEADER = re.compile(r"""^\s*\[\[\s*(?:rule|"rule"|'rule')\s*\]\]""")
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


class LexiconError(ValueError):
    """A lexicon that cannot be used: the message names where (file:line, or the rule) and what."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


@dataclass(frozen=True)
class Rule:
    """One `term -> say` rule. Constructing one checks and normalises it (a Rule is always usable):
    term and say stripped and NFC, a term's inner white space one space, case and language
    lower-case, an empty language or voice None."""
    term: str
    say: str
    case: str = DEFAULT_CASE
    language: str | None = None
    voice: str | None = None
    source: str = "<rules>"   # "file:line", for errors and for the Rewrite records

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem:
            named = isinstance(self.term, str) and self.term.strip()
            raise LexiconError(f"{self.source} (term {self.term.strip()!r})" if named else self.source, problem)
        # frozen: normalised values are set once, here
        object.__setattr__(self, "term", " ".join(_nfc(self.term).split()))
        object.__setattr__(self, "say", _nfc(self.say).strip())
        object.__setattr__(self, "case", self.case.strip().lower())
        object.__setattr__(self, "language", (self.language or "").strip().lower() or None)
        object.__setattr__(self, "voice", (self.voice or "").strip() or None)

    @property
    def specificity(self) -> int:
        """3: voice and language, 2: voice, 1: language, 0: every voice and language."""
        return 2 * (self.voice is not None) + (self.language is not None)

    @property
    def identity(self) -> tuple:
        """What makes two rules the same rule (a duplicate in one file, an override in a merge)."""
        term = self.term if self.case == "sensitive" else self.term.casefold()
        voice = self.voice.casefold() if self.voice else None
        return (term, self.case, self.language, voice)

    def describe(self) -> str:
        return (f"term {self.term!r} (language {self.language or 'any'}, voice {self.voice or 'any'}, "
                f"case {self.case})")

    def applies(self, language: str | None, voice: str | None) -> bool:
        """`language` lower-case or None, `voice` casefolded or None (see _request)."""
        return ((self.language is None or self.language == language)
                and (self.voice is None or self.voice.casefold() == voice))


@dataclass(frozen=True)
class Rewrite:
    """One rewrite apply() made: `term` as it appeared in the text, at `start` in the text given."""
    term: str
    replacement: str
    start: int
    source: str   # the rule's "file:line"

    @property
    def end(self) -> int:
        return self.start + len(self.term)


class Lexicon:
    """A set of rules (no two the same rule), matched as the module docstring says."""

    def __init__(self, rules=()):
        self._rules: tuple[Rule, ...] = tuple(rules)
        _check_duplicates(self._rules)
        self._scopes: dict[tuple, dict] = {}          # (language, voice) -> _candidates' answer
        self._compiled: dict[int, re.Pattern] = {}    # rule index -> its pattern, shared by scopes

    @classmethod
    def from_rules(cls, rules: list[Rule]) -> "Lexicon":
        return cls(rules)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Lexicon":
        """Rules from a .toml or .csv file (by its suffix); any problem is a LexiconError."""
        name = str(path)
        suffix = Path(path).suffix.lower()
        if suffix not in (".toml", ".csv"):
            raise LexiconError(name, f"unknown lexicon format {suffix or '(no suffix)'!r}: "
                                     "a lexicon is a .toml or a .csv file")
        return cls.from_rules_text(_read(name), suffix[1:], name)

    @classmethod
    def from_rules_text(cls, text: str, format: str = "csv", name: str = "<text>") -> "Lexicon":
        """Rules from a lexicon file's contents, "csv" or "toml"; `name` stands for the file in
        sources and errors."""
        if format not in ("csv", "toml"):
            raise LexiconError(name, f"unknown lexicon format {format!r}: csv or toml")
        return cls(_toml_rules(text, name) if format == "toml" else _csv_rules(text, name))

    def merge(self, other: "Lexicon") -> "Lexicon":
        """Both lexicons' rules; where both have the same rule (term and scope), `other`'s."""
        replaced = {rule.identity for rule in other._rules}
        return Lexicon([r for r in self._rules if r.identity not in replaced] + list(other._rules))

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self._rules

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        return f"Lexicon({len(self)} rules)"

    def apply(self, text: str, language: str | None, voice: str | None) -> tuple[str, list[Rewrite]]:
        """`text` with the rules for this language and voice applied, and what was rewritten."""
        candidates = self._candidates(*_request(language, voice))
        if not candidates:
            return text, []
        out: list[str] = []
        rewrites: list[Rewrite] = []
        last = at = 0
        # One scan, left to right: at each place the first rule (in precedence order) that matches
        # wins, and the scan goes on after it, so no span is rewritten twice.
        while at < len(text):
            hit = self._first_match(candidates.get(text[at].lower(), ()), text, at)
            if hit is None:
                at += 1
                continue
            match, rule = hit
            out += [text[last:at], rule.say]
            rewrites.append(Rewrite(match.group(), rule.say, at, rule.source))
            last = at = match.end()
        out.append(text[last:])
        return "".join(out), rewrites

    def _candidates(self, language: str | None, voice: str | None) -> dict[str, list[int]]:
        """The indices of the rules for this scope, in precedence order, by the (lower-case) character
        they can start with; built once per scope. One alternation of all the rules would read the
        same but try every rule at every character (seconds per sentence with thousands of rules)."""
        key = (language, voice)
        if key not in self._scopes:
            ordered = sorted((i for i, r in enumerate(self._rules) if r.applies(language, voice)),
                             key=lambda i: _precedence(self._rules[i], i))
            by_first: dict[str, list[int]] = {}
            for i in ordered:
                for first in _first_keys(self._rules[i]):
                    by_first.setdefault(first, []).append(i)
            self._scopes[key] = by_first
        return self._scopes[key]

    def _first_match(self, candidates: list[int], text: str, at: int) -> tuple[re.Match, Rule] | None:
        """The first of `candidates` that matches as a whole word at `at`. The boundaries are the
        lookarounds (?<!\\w) and (?!\\w), checked here rather than in each rule's regex (which stays
        small and cheap to compile), and widened for CJK: a CJK side of a term has no boundary
        (substring match), and a CJK character beside a Latin term does not continue it ("私はSQLが")."""
        inside_word = at > 0 and _continues_word(text[at - 1])
        for i in candidates:
            rule = self._rules[i]
            if inside_word and not _CJK_CHAR.match(rule.term[0]):
                continue
            if i not in self._compiled:   # compiled when first needed: in a big lexicon most never are
                self._compiled[i] = re.compile(_rule_regex(rule))
            match = self._compiled[i].match(text, at)
            if match and (match.end() == len(text) or _CJK_CHAR.match(rule.term[-1])
                          or not _continues_word(text[match.end()])):
                return match, rule
        return None


def _precedence(rule: Rule, index: int) -> tuple:
    """Sort key, first wins: more specific scope, longer term, case-sensitive, earlier in the lexicon."""
    return (-rule.specificity, -len(rule.term), rule.case != "sensitive", index)


def _first_keys(rule: Rule) -> set[str]:
    """The lower-case characters a match of the rule can start with (apply looks up text[i].lower())."""
    first = rule.term[0]
    if rule.case == "sensitive":
        return {first.lower()}
    return {first.lower(), first.upper().lower(), first.casefold()[0]}


def _continues_word(ch: str) -> bool:
    """A letter, digit or underscore (what \\w matches) that is not CJK, or a combining mark (part of
    the letter before it: "SQLe" + U+0301 is not "SQL" + "e")."""
    if _CJK_CHAR.match(ch):
        return False
    return ch.isalnum() or ch == "_" or unicodedata.category(ch).startswith("M")


def _request(language: str | None, voice: str | None) -> tuple[str | None, str | None]:
    """A request's scope as rules compare it: "auto" is no language; both ignore case."""
    language = (language or "").strip().lower() or None
    if language == AUTO:
        language = None
    return language, (voice.strip().casefold() or None) if voice else None


def _rule_regex(rule: Rule) -> str:
    """The term as a regex: literal, any run of white space between its words, any case if insensitive.
    The word boundaries are checked by Lexicon._first_match."""
    body = r"\s+".join(re.escape(word) for word in rule.term.split(" "))
    return f"(?i:{body})" if rule.case == "insensitive" else body


def _nfc(value: str) -> str:
    return unicodedata.normalize("NFC", value)


def _problem(rule: Rule) -> str | None:
    """What is wrong with a rule as given, or None."""
    for name in FIELDS:
        value = getattr(rule, name)
        if not (isinstance(value, str) or (value is None and name in ("language", "voice"))):
            return f"{name} must be text, got {value!r}"
    if not rule.term.strip():
        return f"the term is {'empty' if not rule.term else 'only white space'}"
    if not rule.say.strip():
        return "'say' is empty (a rule must say something)"
    if rule.case.strip().lower() not in CASES:
        return f"unknown case {rule.case!r}; allowed: {', '.join(CASES)}"
    if (rule.language or "").strip().lower() == AUTO:
        return ("language 'auto' never applies (auto requests use only the rules without a language): "
                "leave language out for every language")
    return None


def _check_duplicates(rules: tuple[Rule, ...]) -> None:
    first: dict[tuple, Rule] = {}
    for rule in rules:
        earlier = first.setdefault(rule.identity, rule)
        if earlier is not rule:
            raise LexiconError(rule.source, f"duplicate rule for {rule.describe()}; "
                                            f"the first is at {earlier.source}")


def _read(name: str) -> str:
    from ..untrusted import InputError, read_bytes
    try:
        data = read_bytes(name, MAX_LEXICON_FILE_BYTES)   # (its size checked before it is read)
    except InputError as e:
        raise LexiconError(name, str(e).removeprefix(f"{name}: ")) from None
    except OSError as e:
        raise LexiconError(name, f"cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8-sig")   # a spreadsheet's byte-order mark is not part of the text
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise LexiconError(f"{name}:{line}", f"not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start}); "
                                             "save the lexicon as UTF-8") from None


def _toml_rules(text: str, name: str) -> list[Rule]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # 3.11's error has the position only in its message; newer ones also as lineno
        line = getattr(e, "lineno", None)
        found = _TOML_POSITION.search(str(e))
        if line is None and found:
            line = int(found.group(1))
        raise LexiconError(f"{name}:{line}" if line else name, f"TOML syntax error: {e}") from None
    except RecursionError:   # (tomllib nests without bound: `a = [[[[...`)
        raise LexiconError(name, "nested too deeply to be a lexicon") from None
    extra = sorted(set(data) - {"rule"})
    if extra:
        raise LexiconError(name, f"unknown top-level key(s) {', '.join(map(repr, extra))}; "
                                 "a lexicon holds only [[rule]] tables")
    entries = data.get("rule", [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise LexiconError(name, "'rule' must be an array of tables: write each rule under [[rule]]")
    # tomllib keeps no positions: the Nth [[rule]] header is the Nth rule's line, when they tally
    headers = [n for n, line in enumerate(text.splitlines(), 1) if _TOML_RULE_HEADER.match(line)]
    lines = headers if len(headers) == len(entries) else None
    rules = []
    for index, entry in enumerate(entries, 1):
        source = f"{name}:{lines[index - 1]}" if lines else f"{name}:rule {index}"
        term = entry.get("term")
        label = f"{source} (rule {index}" + (f", term {term!r})" if isinstance(term, str) and term.strip() else ")")
        unknown = sorted(set(entry) - set(FIELDS))
        if unknown:
            raise LexiconError(label, f"unknown key(s) {', '.join(map(repr, unknown))}; "
                                      f"allowed: {', '.join(FIELDS)}")
        missing = [key for key in ("term", "say") if key not in entry]
        if missing:
            raise LexiconError(label, f"missing {' and '.join(map(repr, missing))}")
        try:
            rules.append(Rule(term, entry["say"], entry.get("case", DEFAULT_CASE), entry.get("language"),
                              entry.get("voice"), source=source))
        except LexiconError as e:   # the same problem, said with the rule's index and term
            raise LexiconError(label, e.problem) from None
    return rules


def _csv_rules(text: str, name: str) -> list[Rule]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if header is None:
            raise LexiconError(name, "the file is empty: a lexicon CSV starts with a header row "
                                     f"({','.join(FIELDS)})")
        columns = [cell.strip().lower() for cell in header]
        _check_header(columns, f"{name}:1")
        rules = []
        line = reader.line_num + 1   # where the next row starts (a quoted cell may span lines)
        for row in reader:
            where, line = f"{name}:{line}", reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue   # blank line
            if len(row) > len(columns):
                raise LexiconError(where, f"{len(row)} cells, but the header names {len(columns)} columns")
            cells = dict(zip(columns, row))
            rules.append(Rule(cells.get("term", ""), cells.get("say", ""),
                              cells.get("case", "").strip() or DEFAULT_CASE,   # an empty cell: the default
                              cells.get("language"), cells.get("voice"), source=where))
        return rules
    except csv.Error as e:
        raise LexiconError(f"{name}:{reader.line_num}", f"CSV error: {e}") from None


def _check_header(columns: list[str], where: str) -> None:
    unknown = [c for c in columns if c not in FIELDS]
    if unknown:
        raise LexiconError(where, f"unknown column(s) {', '.join(map(repr, unknown))}; "
                                  f"allowed: {', '.join(FIELDS)}")
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise LexiconError(where, f"column(s) {', '.join(map(repr, repeated))} given twice")
    missing = [c for c in ("term", "say") if c not in columns]
    if missing:
        raise LexiconError(where, f"missing column(s) {', '.join(map(repr, missing))}; "
                                  "the header needs at least term,say")


def load_lexicons(paths) -> tuple[Lexicon | None, str]:
    """The rules of every file of `paths` (--lexicon), later files winning, and a digest of what the
    files held (a render's request hash sees a rule change)."""
    import hashlib

    from ..untrusted import read_bytes
    lexicon, digest = None, hashlib.sha256()
    for path in paths:
        loaded = Lexicon.load(path)
        lexicon = loaded if lexicon is None else lexicon.merge(loaded)
        digest.update(read_bytes(path, MAX_LEXICON_FILE_BYTES))   # (the bytes: as before, a BOM counts)
    return lexicon, digest.hexdigest()[:16]
