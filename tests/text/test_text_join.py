"""Joining chunks: lengths exact, equal power through a crossfade, no click at any join (the step
between samples stays within the signal's own), and silence trimming that never cuts speech."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia.engine.text.join import JoinSettings, TakeAssembler, join, join_offsets, speech_bounds, trim

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


def rms(x):
    return float(np.sqrt(np.mean(np.asarray(x, np.float64) ** 2)))


# -- equal power ----------------------------------------------------------------------------------

def test_crossfade_gains_squares_sum_to_one():
    n, fade = 2000, 240   # 10 ms
    ones, zeros = np.ones(n, np.float32), np.zeros(n, np.float32)
    settings = JoinSettings(crossfade_ms=10)
    fade_out = join([ones, zeros], SR, settings)[n - fade:n]   # join is linear in each chunk: probe its gains
    fade_in = join([zeros, ones], SR, settings)[n - fade:n]
    np.testing.assert_allclose(fade_out ** 2 + fade_in ** 2, 1.0, atol=1e-6)
    assert np.all(np.diff(fade_in) > 0) and fade_in[0] < 0.01 and fade_in[-1] > 0.99
    assert np.all(fade_out + fade_in >= 1.0 - 1e-6)   # amplitudes add above 1: not a linear fade


def test_crossfade_keeps_the_power_of_uncorrelated_noise():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(24000) for _ in range(2))
    a, b = (0.1 * x / rms(x) for x in (a, b))   # equal RMS, exactly
    fade = 4800   # 200 ms: enough samples for a tight estimate
    out = join([a, b], SR, JoinSettings(crossfade_ms=200))
    overlap = out[24000 - fade:24000]
    assert abs(rms(overlap) / 0.1 - 1) < 0.03
    # the tolerance can fail: a linear crossfade loses ~1.8 dB over the same overlap
    t = (np.arange(fade) + 0.5) / fade
    assert rms((1 - t) * a[-fade:] + t * b[:fade]) / 0.1 < 0.85


# -- lengths and offsets --------------------------------------------------------------------------

@pytest.mark.parametrize("fade_ms", [0.0, 1.0, 5.0, 20.0])
def test_lengths_are_exact_with_overlaps_and_pauses(fade_ms):
    fade = int(round(SR * fade_ms / 1000))
    a, b, c, tiny, small = voiced(4800, 1), voiced(7200, 2), voiced(2400, 3), voiced(30, 4), voiced(50, 5)
    # a leading pause, a crossfade, consecutive pauses (300 ms in all), chunks shorter than the fade
    # side by side, and a trailing pause
    pieces = [20, a, b, 250, 50, c, tiny, small, 100]
    out = join(pieces, SR, JoinSettings(crossfade_ms=fade_ms))
    overlaps = min(fade, 4800, 7200) + min(fade, 2400, 30) + min(fade, 30, 50)
    pauses = 480 + 7200 + 2400
    assert len(out) == 4800 + 7200 + 2400 + 30 + 50 - overlaps + pauses
    assert out.dtype == np.float32

    spans = join_offsets(pieces, SR, JoinSettings(crossfade_ms=fade_ms))
    starts = [480]
    starts.append(starts[-1] + 4800 - min(fade, 4800, 7200))
    starts.append(starts[-1] + 7200 + 7200)
    starts.append(starts[-1] + 2400 - min(fade, 2400, 30))
    starts.append(starts[-1] + 30 - min(fade, 30, 50))
    assert spans == [(s, s + n) for s, n in zip(starts, [4800, 7200, 2400, 30, 50])]
    assert spans[-1][1] + 2400 == len(out)


@pytest.mark.parametrize("pieces_of", [lambda a, b, c: [a, b, c], lambda a, b, c: [a, 100, b, 0, c],
                                       lambda a, b, c: [30, a, c[:40], b, 15]])
def test_offsets_say_where_join_put_each_chunk(pieces_of):
    """join is linear in each chunk, so one chunk joined among zeros shows exactly where it went:
    nothing outside its span, and itself (unfaded) away from its edges."""
    chunks = [voiced(3000, 1), voiced(1000, 2), voiced(2000, 3)]
    settings = JoinSettings(crossfade_ms=5)
    pieces = pieces_of(*chunks)
    spans = join_offsets(pieces, SR, settings)
    arrays = [i for i, p in enumerate(pieces) if isinstance(p, np.ndarray)]
    assert len(spans) == len(arrays)
    for k, i in enumerate(arrays):
        alone = [p if j == i or not isinstance(p, np.ndarray) else np.zeros_like(p) for j, p in enumerate(pieces)]
        out = join(alone, SR, settings)
        start, end = spans[k]
        assert end - start == len(pieces[i])
        assert not out[:start].any() and not out[end:].any()
        np.testing.assert_array_equal(out[start + 120:end - 120], pieces[i][120:-120])


def test_empty_input_empty_chunks_and_pause_only():
    a, b = voiced(2000, 1), voiced(3000, 2)
    assert join([], SR).dtype == np.float32 and len(join([], SR)) == 0
    assert len(join([np.zeros(0, np.float32)], SR)) == 0
    assert len(join([100.0], SR)) == 2400 and not join([100.0], SR).any()
    # an empty chunk joins nothing: the chunks either side crossfade as if it were not there
    empty = np.zeros(0, np.float32)
    np.testing.assert_array_equal(join([a, empty, b], SR), join([a, b], SR))
    assert join_offsets([a, empty, b], SR)[1] == (2000, 2000)
    assert join_offsets([a, 100, empty, b], SR)[1] == (4400, 4400)


# -- no click -------------------------------------------------------------------------------------

@pytest.mark.parametrize("pause", [None, 0.0, 200.0])
def test_no_click_at_any_join(pause):
    chunks = [voiced(9600, i, f0=150 + 40 * i) for i in range(2, 6)]
    assert all(abs(c[0]) > 0.05 and abs(c[-1]) > 0.05 for c in chunks)   # they start and end mid-wave
    pieces = []
    for c in chunks:
        if pieces and pause is not None:
            pieces.append(pause)
        pieces.append(c)
    out = join(pieces, SR)
    own = max(steps(c).max() for c in chunks)   # the largest step inside any chunk
    spans = join_offsets(pieces, SR)
    edges = [e for s, e in spans[:-1]] + [s for s, e in spans[1:]]   # every chunk end and start at a join
    for edge in edges:
        window = out[max(0, edge - 480):edge + 480]
        assert steps(window).max() <= own, (edge, steps(window).max(), own)
    # and the test can fail: plain concatenation steps far outside it at a join
    gap = np.zeros(int(SR * (pause or 0) / 1000), np.float32)
    naive = np.concatenate([x for c in chunks for x in (c, gap)][:-1])
    assert steps(naive).max() > 1.5 * own


# -- trimming -------------------------------------------------------------------------------------

def speech_with_silence(ramp_ms, seed=3):
    """Three seconds: a -70 dBFS noise floor, and three bursts (raised-cosine onsets and decays of
    `ramp_ms`, gaps between them) at positions off the 10 ms frame grid. The first and last are the
    quiet ones, 30 and 32 dB below the loud one, so they decide where trimming may cut. Returns the
    audio and the span from the first to the last speech sample."""
    rng = np.random.default_rng(seed)
    audio = (rng.standard_normal(SR * 3) * 10 ** (-70 / 20)).astype(np.float32)
    bursts = [(14713, 20851, 10 ** (-30 / 20)), (25237, 38404, 1.0), (45611, 55007, 10 ** (-32 / 20))]
    ramp = int(round(SR * ramp_ms / 1000))
    for s, e, level in bursts:
        n = e - s
        envelope = np.ones(n)
        envelope[:ramp] = 0.5 - 0.5 * np.cos(np.pi * (np.arange(ramp) + 1) / (ramp + 1))
        envelope[n - ramp:] = envelope[:ramp][::-1]
        audio[s:e] += (level * voiced(n, s) * envelope).astype(np.float32)
    return audio, bursts[0][0], bursts[-1][1]


def locate(part, whole):
    """Where `part` lies in `whole`, asserting it is one unchanged piece of it."""
    windows = np.lib.stride_tricks.sliding_window_view(whole, 64)
    at = int(np.flatnonzero(np.all(windows == part[:64], axis=1))[0])
    np.testing.assert_array_equal(part, whole[at:at + len(part)])
    return at, at + len(part)


@pytest.mark.parametrize("keep_ms", [40.0, 25.0])
def test_trimming_never_cuts_known_speech(keep_ms):
    keep, frame = int(round(SR * keep_ms / 1000)), SR // 100
    settings = JoinSettings(trim_silence=True, trim_keep_ms=keep_ms)
    # onsets of 1 ms: the speech is above threshold from its first frame, so the whole margin is kept
    audio, first, last = speech_with_silence(ramp_ms=1)
    start, end = locate(trim(audio, SR, settings), audio)
    assert start <= first - keep and end >= last + keep   # every speech sample, and the margin
    assert start >= first - keep - frame and end <= last + keep + frame   # the silence beyond it is gone
    # 30 ms onsets and decays, whose first and last samples lie far below the threshold: the margin
    # still reaches back to the first speech sample and on to the last
    audio, first, last = speech_with_silence(ramp_ms=30)
    out = trim(audio, SR, settings)
    start, end = locate(out, audio)
    assert start <= first and end >= last
    assert start >= first - keep - frame and end <= last + keep + frame
    # (the margin is what keeps them: with none, the soft edges would be cut)
    bare_start, bare_end = locate(trim(audio, SR, JoinSettings(trim_keep_ms=0)), audio)
    assert bare_start > first and bare_end < last
    # relative to the chunk's own loudest frame: a quieter rendering trims the same
    assert len(trim(audio * np.float32(0.01), SR, settings)) == len(out)


def test_trim_keeps_to_the_array_and_speech_bounds_edges():
    voice = voiced(4800, 7)
    out = trim(np.concatenate([voice, np.zeros(2400, np.float32)]), SR, JoinSettings(trim_keep_ms=40))
    np.testing.assert_array_equal(out[:4800], voice)   # speech at the very start: clamped at 0
    assert len(out) == 4800 + 960
    assert speech_bounds(np.zeros(SR, np.float32), SR, -45) == (0, 0)
    assert speech_bounds(np.zeros(0, np.float32), SR, -45) == (0, 0)
    assert len(trim(np.zeros(SR, np.float32), SR, JoinSettings())) == 0
    # a few samples left after the last whole frame: heard over their own length, and not the reference
    quiet = np.full(2400, 0.01, np.float32)
    loud = np.full(2400, 1.0, np.float32)
    tail = np.array([30.0, -30.0, 30.0], np.float32)   # one peak, far above any frame's mean
    assert speech_bounds(np.concatenate([quiet, loud, tail]), SR, -45) == (0, 4803)


def test_join_trims_each_chunk_when_asked_and_skips_an_all_silent_one():
    padded = np.concatenate([np.zeros(SR, np.float32), voiced(4800, 9), np.zeros(SR, np.float32)])
    settings = JoinSettings(trim_silence=True, trim_keep_ms=20)
    silent = np.zeros(SR, np.float32)
    out = join([padded, 100, silent, padded], SR, settings)
    keep = int(0.02 * SR)
    assert len(out) == 2 * (4800 + 2 * keep) + 2400
    assert join_offsets([padded, 100, silent, padded], SR, settings)[1] == (4800 + 2 * keep + 2400,) * 2
    np.testing.assert_array_equal(out, join([padded, 100, padded], SR, settings))


# -- inputs, dtype, errors ------------------------------------------------------------------------

@pytest.mark.parametrize("trim_silence", [False, True])
def test_inputs_are_not_changed_and_the_take_is_float32(trim_silence):
    a = np.concatenate([np.zeros(2400), voiced(3000, 1).astype(np.float64), np.zeros(2400)])
    b = np.concatenate([np.zeros(1200, np.float32), voiced(3000, 2), np.zeros(1200, np.float32)])
    pieces = [a, b, 50, b, 10]
    kept = [p.copy() if isinstance(p, np.ndarray) else p for p in pieces]
    out = join(pieces, SR, JoinSettings(trim_silence=trim_silence))
    assert out.dtype == np.float32
    for p, k in zip(pieces, kept):
        np.testing.assert_array_equal(p, k)
    assert pieces == pieces and len(pieces) == 5
    trimmed = trim(b, SR, JoinSettings())
    trimmed[:] = 9.0   # trim returns its own array, not a view of the input
    np.testing.assert_array_equal(b, kept[1])


@pytest.mark.parametrize("field, value", [("crossfade_ms", -1.0), ("crossfade_ms", float("nan")),
                                          ("trim_threshold_db", 3.0), ("trim_threshold_db", 0.0),
                                          ("trim_threshold_db", -500.0), ("trim_keep_ms", -5.0),
                                          ("trim_keep_ms", float("inf"))])
def test_bad_settings_are_named(field, value):
    with pytest.raises(ValueError, match=field):
        JoinSettings(**{field: value}).validate()
    with pytest.raises(ValueError, match=field):
        join([voiced(100, 0)], SR, JoinSettings(**{field: value}))


def test_bad_pieces_and_arguments_are_named():
    a = voiced(100, 0)
    with pytest.raises(ValueError, match=r"pieces\[1\].*pause.*-5"):
        join([a, -5.0], SR)
    with pytest.raises(ValueError, match=r"pieces\[0\]"):
        join(["hello", a], SR)
    with pytest.raises(ValueError, match=r"pieces\[1\].*mono"):
        join([a, np.zeros((100, 2), np.float32)], SR)
    with pytest.raises(ValueError, match="sample_rate"):
        join([a], 0)
    with pytest.raises(ValueError, match="threshold_db"):
        speech_bounds(a, SR, 0.0)
    with pytest.raises(ValueError, match="frame_ms"):
        speech_bounds(a, SR, -45, frame_ms=0)


# -- streaming ------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(40))
def test_the_assembler_streams_exactly_what_join_makes(seed):
    """Random pieces (chunks long and very short, pauses of 0 ms and more, leading and trailing
    pauses, empty chunks), each chunk fed in random parts: the streamed samples are join's, bit for
    bit, and each chunk's span is join_offsets' (subtitles are made from these)."""
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
    assert assembler.spans == join_offsets(pieces, SR, settings)
