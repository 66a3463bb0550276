"""Joining chunks: lengths exact, equal power through a crossfade, no click at any join (the step
between samples stays within the signal's own), and silence trimming that never cuts speech."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia.engine.text.join import JoinSettings, join, join_offsets, speech_bounds, trim

SR = 24000


def voiced(n, seed, f0=180.0):
    """Speech-like audio: harmonics with a slow envelope, starting and ending at arbitrary phase
    (first and last samples far from zero, as a chunk cut from a longer take can be)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / SR
    x = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6.28)) / k for k in range(1, 8))
    return (0.3 * x * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t + rng.uniform(0, 6.28)))).astype(np.float32)


def steps(x):
    return np.abs(np.diff(x))


@pytest.mark.parametrize("fade_ms", [0.0, 5.0, 20.0])
def test_lengths_are_exact_with_overlaps_and_pauses(fade_ms):
    s = JoinSettings(crossfade_ms=fade_ms)
    fade = int(round(SR * fade_ms / 1000))
    a, b, c, tiny = voiced(4800, 1), voiced(7200, 2), voiced(2400, 3), voiced(30, 4)
    pieces = [a, b, 250, 50, c, tiny, 100]
    out = join(pieces, SR, s)
    overlap_ab, overlap_c_tiny = min(fade, 4800, 7200), min(fade, 2400, 30)
    assert len(out) == 4800 + 7200 + 2400 + 30 - overlap_ab - overlap_c_tiny + int(SR * 0.4)
    spans = join_offsets(pieces, SR, s)
    assert spans == [(0, 4800), (4800 - overlap_ab, 12000 - overlap_ab),
                     (12000 - overlap_ab + 7200, 14400 - overlap_ab + 7200),
                     (14400 - overlap_ab + 7200 - overlap_c_tiny, 14430 - overlap_ab + 7200 - overlap_c_tiny)]
    assert out.dtype == np.float32
    assert len(join([], SR)) == 0 and len(join([100.0], SR)) == 2400


def test_a_crossfade_keeps_the_power_of_uncorrelated_audio():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(48000).astype(np.float32) for _ in range(2))
    fade = 2400   # 100 ms: enough samples for a tight estimate
    out = join([a, b], SR, JoinSettings(crossfade_ms=100))
    middle = out[48000 - fade:48000]
    assert abs(np.sqrt(np.mean(middle ** 2)) - 1.0) < 0.05
    halfway = 0.5 * a[-fade:] + 0.5 * b[:fade]   # a linear fade loses ~3 dB at its middle
    assert np.sqrt(np.mean(halfway ** 2)) < 0.75


@pytest.mark.parametrize("pause", [None, 200.0])
def test_no_click_at_any_join(pause):
    chunks = [voiced(9600, i, f0=150 + 40 * i) for i in range(4)]
    pieces = []
    for c in chunks:
        if pieces and pause is not None:
            pieces.append(pause)
        pieces.append(c)
    out = join(pieces, SR)
    # the signal's own steps: the largest sample-to-sample step inside any chunk
    own = max(steps(c).max() for c in chunks)
    for start, end in join_offsets(pieces, SR)[1:]:
        window = out[max(0, start - 480):start + 480]
        assert steps(window).max() <= own, (start, steps(window).max(), own)
    # and the test can fail: plain concatenation steps far outside it at a join
    naive = np.concatenate([np.concatenate([c, np.zeros(int(SR * (pause or 0) / 1000), np.float32)]) for c in chunks])
    assert steps(naive).max() > 1.5 * own


def test_trimming_never_cuts_known_speech():
    rng = np.random.default_rng(3)
    n = SR * 3
    audio = (rng.standard_normal(n) * 10 ** (-70 / 20)).astype(np.float32)   # a -70 dBFS noise floor
    spans = [(int(0.7 * SR), int(1.1 * SR), 1.0), (int(1.3 * SR), int(1.5 * SR), 10 ** (-30 / 20)),
             (int(1.9 * SR), int(2.2 * SR), 0.5)]   # loud, quiet (-30 dB), a gap between each
    for s, e, level in spans:
        attack = np.minimum(1.0, np.arange(e - s) / (0.03 * SR))   # a soft 30 ms onset
        audio[s:e] += level * voiced(e - s, s)[:e - s] * attack.astype(np.float32)
    settings = JoinSettings(trim_silence=True, trim_keep_ms=40)
    out = trim(audio, SR, settings)
    first, last = spans[0][0], spans[-1][1]
    keep = int(0.04 * SR)
    start = int(np.flatnonzero(np.all(np.lib.stride_tricks.sliding_window_view(audio, 64) == out[:64], axis=1))[0])
    np.testing.assert_array_equal(out, audio[start:start + len(out)])   # one piece of the original
    assert start <= first - keep and start + len(out) >= last + keep   # every speech sample, and the margin
    assert start >= first - keep - int(0.01 * SR) and start + len(out) <= last + keep + int(0.01 * SR)   # silence gone
    assert speech_bounds(np.zeros(SR, np.float32), SR, -45) == (0, 0)
    assert len(trim(np.zeros(SR, np.float32), SR, settings)) == 0


def test_join_trims_each_chunk_when_asked_and_leaves_the_inputs_alone():
    padded = np.concatenate([np.zeros(SR, np.float32), voiced(4800, 9), np.zeros(SR, np.float32)])
    before = padded.copy()
    out = join([padded, 100, padded], SR, JoinSettings(trim_silence=True, trim_keep_ms=20))
    keep = int(0.02 * SR)
    assert len(out) == 2 * (4800 + 2 * keep) + 2400
    np.testing.assert_array_equal(padded, before)


@pytest.mark.parametrize("field, value", [("crossfade_ms", -1.0), ("trim_threshold_db", 3.0),
                                          ("trim_keep_ms", -5.0)])
def test_bad_settings_are_named(field, value):
    with pytest.raises(ValueError, match=field):
        join([voiced(100, 0)], SR, JoinSettings(**{field: value}))
    with pytest.raises(ValueError, match="pause"):
        join([voiced(100, 0), -5.0], SR)


@pytest.mark.parametrize("seed", range(40))
def test_the_assembler_streams_exactly_what_join_makes(seed):
    """Random pieces (chunks long and very short, pauses of 0 ms and more, leading and trailing
    pauses, empty chunks), each chunk fed in random parts: the streamed samples are join's, bit for bit."""
    from kazeia.engine.text.join import TakeAssembler
    rng = np.random.default_rng(seed)
    settings = JoinSettings(crossfade_ms=float(rng.choice([0.0, 1.0, 5.0, 30.0])),
                            trim_silence=bool(seed % 5 == 4))
    pieces = []
    for _ in range(rng.integers(1, 7)):
        kind = rng.random()
        if kind < 0.3:
            pieces.append(float(rng.choice([0.0, 7.0, 150.0])))
        else:
            n = int(rng.choice([0, 3, 50, 700, 4000]))
            audio = voiced(n, int(rng.integers(1e6))) if n else np.zeros(0, np.float32)
            if settings.trim_silence and n:
                audio = np.concatenate([np.zeros(300, np.float32), audio, np.zeros(500, np.float32)])
            pieces.append(audio)
    assembler, streamed = TakeAssembler(SR, settings), []
    for piece in pieces:
        if isinstance(piece, np.ndarray):
            cuts = np.sort(rng.integers(0, len(piece) + 1, size=rng.integers(0, 4)))
            for part in np.split(piece, cuts):
                streamed.append(assembler.audio(part))
            streamed.append(assembler.end_chunk())
        else:
            streamed.append(assembler.pause(piece))
    streamed.append(assembler.finish())
    np.testing.assert_array_equal(np.concatenate(streamed), join(pieces, SR, settings))
