"""Blind listening tests: the p-values against a published table, the trial order from its seed, the
statistic over a simulated listener who guesses (two identical takes: chance), results saved and read
back, and `kazeia abx` in a terminal, played on an ALSA device and answered by a listener who hears it."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

from kazeia.engine.takes.blind_test import BlindTest, abx_p_value, format_p, preference_p_value, saved_tests, trial_order

# One-sided binomial tail P(X >= k | n, 1/2), as ABX tables print it (e.g. foobar2000's ABX
# comparator, and Leventhal's "Type 1 and type 2 errors in the statistical analysis of listening
# tests", JAES 1986, table 1)
TABLE = {(16, 16): 0.0000153, (16, 15): 0.000259, (16, 14): 0.00209, (16, 13): 0.0106, (16, 12): 0.0384,
         (16, 11): 0.105, (16, 10): 0.227, (16, 9): 0.402, (16, 8): 0.598, (10, 9): 0.0107, (10, 8): 0.0547,
         (20, 15): 0.0207, (20, 14): 0.0577, (8, 7): 0.0352, (8, 8): 0.00391}


def test_p_values_match_the_table():
    for (n, k), p in TABLE.items():
        assert abs(abx_p_value(k, n) - p) < 0.01 * p, (n, k)   # (the table's three digits)
    assert preference_p_value(12, 16) == pytest.approx(2 * 0.0384, abs=2e-4)
    assert preference_p_value(4, 16) == preference_p_value(12, 16)
    assert preference_p_value(8, 16) == 1.0
    assert [format_p(p) for p in (1.53e-5, 0.00209, 0.0384, 0.402, 1.0)] == ["0.00002", "0.0021", "0.038", "0.40", "1.0"]


def test_verdicts_say_what_the_numbers_say():
    t = BlindTest("abx", {"label": "a"}, {"label": "b"}, trials=16, seed=3)
    for hidden in t.order:
        t.answer(hidden)
    assert t.finished and t.correct == 16 and t.verdict == "16 of 16: audibly different, p = 0.00002"
    t = BlindTest("abx", {}, {}, trials=16, seed=3)
    for i, hidden in enumerate(t.order):
        t.answer(hidden if i < 9 else ("A" if hidden == "B" else "B"))
    assert t.verdict == "9 of 16: not shown to differ, p = 0.40"
    with pytest.raises(ValueError, match="over"):
        t.answer("A")
    p = BlindTest("preference", {}, {}, trials=4, seed=1)
    for _ in range(4):
        p.answer("1" if p.sound("1") == "A" else "2")   # always the one that is A
    assert p.preferred_a == 4 and p.verdict.startswith("A preferred 4 of 4: not shown to be a preference")
    with pytest.raises(ValueError, match="answer 1 or 2"):
        BlindTest("preference", {}, {}).answer("A")
    with pytest.raises(ValueError, match="unknown test"):
        BlindTest("abc", {}, {})


def test_the_seed_gives_the_order_and_both_sounds_come_up():
    assert trial_order(16, 42) == trial_order(16, 42)
    orders = {tuple(trial_order(16, s)) for s in range(50)}
    assert len(orders) == 50
    every = [x for s in range(200) for x in trial_order(16, s)]
    assert abs(every.count("A") / len(every) - 0.5) < 0.03
    t = BlindTest("abx", {}, {}, seed=42)
    assert [t.sound("X") for _ in range(1)] == [trial_order(16, 42)[0]]
    assert {t.sound("A"), t.sound("B")} == {"A", "B"}


def test_two_identical_takes_give_chance_over_a_listener_who_guesses():
    """The listener cannot tell (identical takes) and guesses: 2000 tests of 16 trials. Correct answers
    average 8; "audibly different" (p < 0.05, i.e. 12 or more of 16) comes up about 3.84% of the time."""
    rng = random.Random(7)
    correct, significant = [], 0
    for seed in range(2000):
        t = BlindTest("abx", {"label": "take 1"}, {"label": "take 1 again"}, trials=16, seed=seed)
        while not t.finished:
            t.answer(rng.choice("AB"))
        correct.append(t.correct)
        significant += t.p_value < 0.05
    assert abs(np.mean(correct) - 8) < 0.15
    expected = abx_p_value(12, 16)   # 0.0384
    sd = (expected * (1 - expected) / 2000) ** 0.5
    assert abs(significant / 2000 - expected) < 4 * sd


def test_results_are_saved_and_read_back(tmp_path):
    t = BlindTest("abx", {"label": "cpu", "take": "t1"}, {"label": "accel", "take": "t2"}, trials=5, seed=11,
                  gains_db=(1.5, -0.5))
    for hidden in t.order:
        t.answer(hidden)
    t.save(tmp_path)
    (tmp_path / "listening" / "broken.json").write_text("{not json")
    back = saved_tests(tmp_path)
    assert len(back) == 1 and back[0].to_dict() == t.to_dict() and back[0].verdict == t.verdict
    csv = t.to_csv().splitlines()
    assert csv[0].startswith("# abx test") and "seed 11" in csv[0] and csv[1] == "trial,x_was,answer,correct"
    assert len(csv) == 2 + 5 and all(line.endswith(",1") for line in csv[2:])


def _tone(path: Path, freq: float, amplitude: float, seconds: float = 3.0) -> Path:
    t = np.arange(int(seconds * 24000)) / 24000
    soundfile.write(path, (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32), 24000, subtype="FLOAT")
    return path


def _captured() -> np.ndarray:
    path = Path(os.environ["KAZEIA_CAPTURE_OUT"])
    return np.fromfile(path, dtype=np.float32) if path.exists() else np.zeros(0, np.float32)


def _pitch(audio: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    return float(np.argmax(spectrum) * 24000 / len(audio))


def test_kazeia_abx_in_a_terminal_heard_on_an_alsa_device(tmp_path):
    """A listener who hears X on the capture device (its pitch) and answers: every trial right, and the
    two tones (14 dB apart as files) reach the device loudness-matched."""
    a, b = _tone(tmp_path / "a.wav", 440.0, 0.5), _tone(tmp_path / "b.wav", 660.0, 0.1)
    proc = subprocess.Popen([sys.executable, "-m", "kazeia.engine", "abx", a, b, "--trials", "4", "--seed", "9",
                             "--device", "kazeia_capture", "-o", tmp_path / "result.json"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    levels = []
    try:
        for _ in range(4):
            before = len(_captured())
            proc.stdin.write("x\n")
            proc.stdin.flush()
            deadline = time.time() + 30
            while True:   # a second of sound on the device (paced to real time); the last 0.3 s is X's
                heard = _captured()[before:]
                heard = heard[heard != 0]
                if len(heard) >= 24000 or time.time() > deadline:
                    break
                time.sleep(0.05)
            assert len(heard) >= 24000, "nothing reached the audio device"
            x = heard[-7200:]
            levels.append(float(np.sqrt(np.mean(x ** 2))))
            proc.stdin.write("xa\n" if abs(_pitch(x) - 440) < 30 else "xb\n")
            proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "4 of 4: not shown to differ, p = 0.062" in out   # (4 of 4 is p = 0.0625: too few trials to show it)
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["seed"] == 9 and result["result"]["correct"] == 4 and result["a"]["label"] == "a.wav"
    assert set(trial_order(4, 9)) == {"A", "B"}   # (both tones were X)
    assert max(levels) / min(levels) < 1.1   # loudness-matched on the device (unmatched: 5x apart)


def test_kazeia_abx_says_what_is_wrong(tmp_path):
    from support.commands import kazeia
    a = _tone(tmp_path / "a.wav", 440.0, 0.5)
    r = kazeia("abx", a, tmp_path / "missing.wav")
    assert r.returncode == 2 and "missing.wav: no such file" in r.stderr and "Traceback" not in r.stderr
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio")
    r = kazeia("abx", a, junk)
    assert r.returncode == 2 and "cannot read audio" in r.stderr
    r = kazeia("abx", a, a, "--device", "no-such-device")
    assert r.returncode == 2 and "no audio output device 'no-such-device'" in r.stderr
    r = subprocess.run([sys.executable, "-m", "kazeia.engine", "abx", a, a, "--device", "kazeia_capture"],
                       input="x\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "no result" in r.stderr
