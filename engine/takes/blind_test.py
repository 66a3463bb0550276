"""Blind listening tests: ABX ("is X the same as A or as B?") and a blind preference test ("which sounds
better?") between two sounds, for the workbench's Blind test dialog and `kazeia abx`.

The trial order comes from a seeded generator (the seed is kept with the result, so the order can be
shown again and checked); the answers are scored after the last trial. ABX: the number correct and the
one-sided exact binomial p-value (the chance of doing at least as well by guessing). Preference: the
split and a two-sided p-value (the chance of a split at least this uneven with no preference at all).
A p-value below 0.05 says a difference was heard (ABX) or one side was preferred; a larger one says only
that this test did not show it, not that there is none (16 trials find only large effects)."""
from __future__ import annotations

import csv
import io
import json
import math
import random
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..untrusted import InputError, bounded, loads, read_bytes, shown, text_field

KINDS = ("abx", "preference")
ALPHA = 0.05
DEFAULT_TRIALS = 16
MAX_TRIALS = 200
TEST_ID = re.compile(r"[0-9a-f]{1,32}")   # uuid4().hex[:12]: it names the saved file
MAX_RESULT_BYTES = 2**20


def binomial_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2), exactly."""
    if k <= 0:
        return 1.0
    return sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n


def abx_p_value(correct: int, trials: int) -> float:
    """One-sided: the chance of `correct` or more right answers out of `trials` by guessing."""
    return binomial_tail(correct, trials)


def preference_p_value(a: int, trials: int) -> float:
    """Two-sided: the chance of a split at least as uneven as `a` against `trials - a` by chance."""
    return min(1.0, 2 * binomial_tail(max(a, trials - a), trials))


def format_p(p: float) -> str:
    """Two significant digits; one below 0.001 (0.00002, 0.0021, 0.038, 0.40, 1.0)."""
    if p <= 0:
        return "0"
    digits = -math.floor(math.log10(p)) + (0 if p < 0.001 else 1)
    return f"{p:.{max(1, digits)}f}"


def trial_order(trials: int, seed: int) -> list[str]:
    """Which sound each trial hides ("A" or "B"): X in an ABX test, the one played first in a
    preference test. The same seed gives the same order on any machine (Python's own generator)."""
    rng = random.Random(seed)
    return [rng.choice("AB") for _ in range(trials)]


@dataclass
class BlindTest:
    """One test between sounds A and B (their identities stay hidden until `finished`)."""
    kind: str                       # abx | preference
    a: dict                         # what A is: label, and a take id or a file
    b: dict
    trials: int = DEFAULT_TRIALS
    seed: int = field(default_factory=lambda: random.SystemRandom().randrange(2 ** 32))
    answers: list[str] = field(default_factory=list)   # per trial: "A"/"B", what X is said to be (abx),
    #                                                   or the sound preferred (preference)
    gains_db: tuple[float, float] = (0.0, 0.0)          # loudness matching applied to A and B
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    started: float = field(default_factory=time.time)
    ended: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown test {self.kind!r}; choose abx or preference")
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or not 1 <= self.trials <= MAX_TRIALS:
            raise ValueError(f"trials must be from 1 to {MAX_TRIALS}, got {self.trials!r}")

    @property
    def order(self) -> list[str]:
        return trial_order(self.trials, self.seed)

    @property
    def trial(self) -> int:
        """The trial being answered (0-based); == trials once finished."""
        return len(self.answers)

    @property
    def finished(self) -> bool:
        return len(self.answers) >= self.trials

    def sound(self, slot: str) -> str:
        """Which sound ("A"/"B") the current trial plays for `slot`: "A", "B" and "X" (abx), or
        "1" and "2" (preference: the first and second of the trial's pair)."""
        hidden = self.order[min(self.trial, self.trials - 1)]
        other = "B" if hidden == "A" else "A"
        slots = {"A": "A", "B": "B", "X": hidden} if self.kind == "abx" else {"1": hidden, "2": other}
        if slot not in slots:
            raise ValueError(f"a {self.kind} trial has no sound {slot!r}; it has {', '.join(slots)}")
        return slots[slot]

    def answer(self, choice: str) -> None:
        """ABX: "A" or "B" (what X is); preference: "1" or "2" (the one that sounded better)."""
        if self.finished:
            raise ValueError("the test is over")
        allowed = ("A", "B") if self.kind == "abx" else ("1", "2")
        if choice not in allowed:
            raise ValueError(f"answer {' or '.join(allowed)}, not {choice!r}")
        self.answers.append(choice if self.kind == "abx" else self.sound(choice))
        if self.finished:
            self.ended = time.time()

    # -- the result (once finished) ---------------------------------------------------------
    @property
    def correct(self) -> int:
        """ABX: answers that named X right."""
        return sum(ans == hidden for ans, hidden in zip(self.answers, self.order))

    @property
    def preferred_a(self) -> int:
        return self.answers.count("A")

    @property
    def p_value(self) -> float:
        n = len(self.answers)
        return abx_p_value(self.correct, n) if self.kind == "abx" else preference_p_value(self.preferred_a, n)

    @property
    def verdict(self) -> str:
        """The result in a sentence."""
        n, p = len(self.answers), self.p_value
        if self.kind == "abx":
            heard = "audibly different" if p < ALPHA else "not shown to differ"
            return f"{self.correct} of {n}: {heard}, p = {format_p(p)}"
        a, b = self.preferred_a, n - self.preferred_a
        lead, count = ("A", a) if a >= b else ("B", b)
        if a == b:
            return f"A {a}, B {b}: no preference, p = {format_p(p)}"
        clear = "a clear preference" if p < ALPHA else "not shown to be a preference"
        return f"{lead} preferred {count} of {n}: {clear}, p = {format_p(p)}"

    def rows(self) -> list[dict]:
        """One row per answered trial (what the CSV holds)."""
        rows = []
        for i, (ans, hidden) in enumerate(zip(self.answers, self.order), 1):
            if self.kind == "abx":
                rows.append({"trial": i, "x_was": hidden, "answer": ans, "correct": int(ans == hidden)})
            else:
                rows.append({"trial": i, "played_first": hidden, "preferred": ans})
        return rows

    def to_dict(self) -> dict:
        d = asdict(self)
        d["gains_db"] = list(self.gains_db)
        if self.finished:
            d["result"] = {"p_value": self.p_value, "verdict": self.verdict,
                           **({"correct": self.correct} if self.kind == "abx" else {"preferred_a": self.preferred_a})}
        return d

    @classmethod
    def from_dict(cls, d, what: str = "blind test") -> "BlindTest":
        """A saved test, every field checked (InputError names `what` and the field)."""
        if not isinstance(d, dict):
            raise InputError(f"{what}: an object is needed, not {type(d).__name__}")
        if d.get("kind") not in KINDS:
            raise InputError(f"{what}: kind: {shown(d.get('kind'))}, not abx or preference")
        for side in ("a", "b"):
            sound = d.get(side)
            if not isinstance(sound, dict):
                raise InputError(f"{what}: {side}: an object is needed, not {type(sound).__name__}")
            text_field(f"{what}: {side}.label", sound.get("label", ""), 10_000)
            for key, value in sound.items():   # (shown and exported: plain values or a placement)
                if isinstance(value, list) or (isinstance(value, dict) and not all(
                        isinstance(v, str) for v in value.values())):
                    raise InputError(f"{what}: {side}.{shown(key)}: not a plain value")
        trials = bounded(f"{what}: trials", d.get("trials", DEFAULT_TRIALS), 1, MAX_TRIALS, integer=True)
        seed = bounded(f"{what}: seed", d.get("seed"), 0, 2**64 - 1, integer=True)
        answers = d.get("answers", [])
        if not isinstance(answers, list) or len(answers) > trials or any(a not in ("A", "B") for a in answers):
            raise InputError(f"{what}: answers: at most {trials} of \"A\" or \"B\" are needed")
        test_id = d.get("id")
        if not isinstance(test_id, str) or not TEST_ID.fullmatch(test_id):
            raise InputError(f"{what}: id: {shown(test_id)} is not a test's id")
        gains = d.get("gains_db", [0.0, 0.0])
        if not isinstance(gains, list) or len(gains) != 2:
            raise InputError(f"{what}: gains_db: two numbers are needed")
        gains = tuple(float(bounded(f"{what}: gains_db[{i}]", g, -120, 120)) for i, g in enumerate(gains))
        started = bounded(f"{what}: started", d.get("started"), 0, 1e11)
        ended = None if d.get("ended") is None else bounded(f"{what}: ended", d["ended"], 0, 1e11)
        return cls(d["kind"], d["a"], d["b"], trials, seed, list(answers), gains, test_id, started, ended)

    def to_csv(self) -> str:
        out = io.StringIO()
        out.write(f"# {self.kind} test {self.id}: A = {self.a.get('label', '')}; B = {self.b.get('label', '')}; "
                  f"seed {self.seed}; {self.verdict if self.finished else 'unfinished'}\n")
        rows = self.rows()
        names = ["trial", "x_was", "answer", "correct"] if self.kind == "abx" else ["trial", "played_first", "preferred"]
        writer = csv.DictWriter(out, names, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue()

    def export(self, path: str | Path) -> Path:
        """The result as CSV (a row per trial) or JSON, by the file's suffix, atomically."""
        from ..atomic import atomic_write_text
        path = Path(path)
        if path.suffix not in (".csv", ".json"):
            raise ValueError(f"{path}: give a .csv or .json file")
        return atomic_write_text(path, self.to_csv() if path.suffix == ".csv"
                                 else json.dumps(self.to_dict(), indent=1, ensure_ascii=False))

    def save(self, folder: str | Path) -> Path:
        """Kept beside the takes (FOLDER/listening/ID.json), atomically."""
        from ..atomic import atomic_write_text
        if not isinstance(self.id, str) or not TEST_ID.fullmatch(self.id):
            raise InputError(f"blind test id {shown(self.id)}: not a test's id; refused")
        path = Path(folder) / "listening" / f"{self.id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(self.to_dict(), indent=1, ensure_ascii=False))
        return path


def saved_tests(folder: str | Path, problems: list[str] | None = None) -> list[BlindTest]:
    """Every finished test kept in FOLDER/listening, oldest first; an unreadable file is passed over,
    and why goes to `problems` (one line naming the file and the field)."""
    tests = []
    for path in sorted((Path(folder) / "listening").glob("*.json")):
        try:
            tests.append(BlindTest.from_dict(loads(read_bytes(path, MAX_RESULT_BYTES), str(path), MAX_RESULT_BYTES),
                                             str(path)))
        except ValueError as e:   # (InputError: the file's fault, named)
            if problems is not None:
                problems.append(str(e))
    return sorted(tests, key=lambda t: t.started)
