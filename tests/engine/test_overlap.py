"""The decoder beside generation (engine/synthesis/overlap.py): the same audio as the stages taking turns, bit
for bit, offline, streamed, in a batch and for in-context cloning; the cores split between the two
sides; a failed push, a cancel and a bad setting end cleanly."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia import _native
from kazeia.engine import Engine, Request, SamplingParams, SpeechDecoder, demo_model_path, open_model
from kazeia.engine.synthesis.overlap import decoder_threads, default_overlap


pytestmark = pytest.mark.levels   # (numbers compared across paths: run again at every lower CPU level)


@pytest.fixture(scope="module")
def turns():
    return Engine.load(demo_model_path(), threads=2)


@pytest.fixture(scope="module")
def overlapped():
    return Engine.load(demo_model_path(), threads=2, overlap=True)


def sampled(engine, seed, frames, **kw):
    return SamplingParams.from_model(engine.info, seed=seed, max_frames=frames, **kw)


@pytest.mark.parametrize("frames", [1, 2, 13, 60])
def test_overlapped_synthesis_gives_the_audio_of_taking_turns(turns, overlapped, frames):
    assert overlapped.overlap_worker is not None and turns.overlap_worker is None
    for seed in (1, 2):
        s = sampled(turns, seed, frames)
        a = turns.take(Request("The decoder works beside generation.", speaker="ryan", sampling=s))
        b = overlapped.take(Request("The decoder works beside generation.", speaker="ryan", sampling=s))
        assert np.array_equal(a.codes, b.codes) and len(b.codes) == frames
        assert np.array_equal(a.audio, b.audio)
        t = b.timings
        assert t.frames == frames == len(t.talker_ms) == len(t.code_predictor_ms) == len(t.decoder_ms)
        assert t.ttfa_ms == t.total_ms > 0 and b.stop_reason == a.stop_reason


def test_an_overlapped_stream_hears_the_first_frame_alone_then_every_frame_once(turns, overlapped):
    s = sampled(turns, 3, 40)
    full = turns.take(Request("Streaming beside generation.", speaker="vivian", sampling=s))
    stream = overlapped.open_take(Request("Streaming beside generation.", speaker="vivian", sampling=s))
    chunks = list(stream)
    assert (chunks[0].first_frame, chunks[0].frames) == (0, 1)   # time to first audio: frame 0 alone
    starts = [c.first_frame for c in chunks]
    assert starts == sorted(starts) and sum(c.frames for c in chunks) == 40
    assert all(c.first_frame + c.frames == n.first_frame for c, n in zip(chunks, chunks[1:]))
    assert all(c.frames >= 4 for c in chunks[1:-1])   # decode_every (4) at a time, more when behind
    assert np.array_equal(np.concatenate([c.audio for c in chunks]), full.audio)
    r = stream.result
    assert np.array_equal(r.codes, full.codes) and len(r.timings.decoder_ms) == 40
    assert 0 < r.timings.ttfa_ms <= r.timings.total_ms


def test_a_batch_decodes_beside_its_steps_with_the_audio_each_gets_alone(turns):
    engine = Engine.load(demo_model_path(), threads=2, max_batch=3, overlap=True)
    requests = [Request(t, speaker=sp, sampling=sampled(turns, 5 + i, 10 + 7 * i))
                for i, (t, sp) in enumerate([("First of three.", "ryan"), ("The second one, longer.", "eric"),
                                             ("Third.", "serena")])]
    together = engine.take_many(requests, max_batch=3)
    for r, got in zip(requests, together):
        alone = turns.take(Request(r.text, speaker=r.speaker, sampling=r.sampling))
        assert np.array_equal(alone.codes, got.codes) and np.array_equal(alone.audio, got.audio)


def test_in_context_cloning_overlapped_is_cut_as_offline(converted, tmp_path):
    import soundfile

    from kazeia.engine import create_voice
    from support.goldens import GOLDEN
    from support.goldens import MANIFEST
    g = np.load(GOLDEN / "base_icl_nonstream.npz")
    st = MANIFEST["cases"]["base_icl_nonstream"]["settings"]
    model = open_model(converted("base"))
    wav = tmp_path / "ref.wav"
    soundfile.write(wav, g["ref_wav"], 24000, subtype="FLOAT")
    voice = create_voice(model, wav, text=st["ref_text"])
    sampling = SamplingParams.from_model(model.info, max_frames=len(g["codes"])).greedy()
    request = dict(language=st["language"], voice=voice, sampling=sampling, streaming_text=False)
    a = Engine(model, threads=2).take(Request(st["text"], **request))
    b = Engine(model, threads=2, overlap=True).take(Request(st["text"], **request))
    assert np.array_equal(b.codes, g["codes"]) and np.array_equal(a.audio, b.audio)
    assert float(np.abs(b.audio - g["wav"]).max()) <= 1e-4


@pytest.mark.parametrize("decoder_type", ["f16", "bf16", "f32"])
def test_decoder_audio_does_not_depend_on_its_threads(converted, decoder_type, tmp_path):
    """What lets the overlapped decoder run on fewer threads than the stages taking turns: every
    product path (Kazeia's and ggml's) gives each output to one thread whatever their number."""
    from kazeia.engine import convert
    from support.goldens import checkpoint_dir
    path = tmp_path / f"cv-{decoder_type}.gguf"
    convert(checkpoint_dir("custom_voice"), path, out_type="q8_0", decoder_type=decoder_type, progress=False)
    model = open_model(path)
    codes = np.random.default_rng(4).integers(0, 2048, size=(30, 16))
    one = SpeechDecoder(model, threads=1).decode(codes)
    two = SpeechDecoder(model, threads=2).decode(codes)
    assert np.array_equal(one, two) and np.abs(one).max() > 0


def test_generation_gives_the_decoder_half_the_cores_and_all_of_them_when_it_waits(turns, monkeypatch):
    assert [decoder_threads(n) for n in (1, 2, 3, 4, 8)] == [1, 1, 1, 2, 4]
    engine = Engine.load(demo_model_path(), threads=2, overlap=True)
    policy, seen = engine.thread_policy, set()
    policy.adaptive = False   # (the split, not how busy the machine is: every core is this engine's)
    apply = policy._apply

    def record():
        apply()
        seen.add((policy.pool.active, engine.overlap_worker.pool.active, engine.overlap_worker.busy,
                  policy._generation_waits))
    monkeypatch.setattr(policy, "_apply", record)
    engine.take(Request("Who has the cores now?", speaker="aiden", sampling=sampled(engine, 1, 30)))
    assert (1, 1, True, False) in seen      # both at work: one core each
    assert any(dec == 2 and waits for _, dec, _, waits in seen)   # generation waits: the decoder has both
    assert all(gen + dec <= 2 for gen, dec, busy, waits in seen if busy and not waits)


def test_a_failed_push_ends_the_synthesis_with_its_error_and_the_engine_goes_on(turns):
    engine = Engine.load(demo_model_path(), threads=2, overlap=True)
    s = sampled(engine, 2, 30)
    session_type = engine.beside_decoder.session(share_compute=True)
    calls = {"n": 0}
    real_push = session_type.push

    def failing(codes):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("the decoder's push failed")
        return real_push(codes)
    session_type.push = failing
    engine.beside_decoder.release(session_type)   # the next stream takes this session
    with pytest.raises(RuntimeError, match="push failed"):
        engine.take(Request("This one fails half-way.", speaker="ryan", sampling=s))
    assert calls["n"] == 3
    again = engine.take(Request("This one fails half-way.", speaker="ryan", sampling=s))
    alone = turns.take(Request("This one fails half-way.", speaker="ryan", sampling=s))
    assert np.array_equal(again.audio, alone.audio)


def test_a_cancelled_overlapped_stream_keeps_exactly_what_was_heard(overlapped):
    stream = overlapped.open_take(Request("A long text that would run for a while before the guard stops it.",
                                          speaker="aiden", sampling=sampled(overlapped, 1, 400)))
    first = next(stream)
    stream.cancel()
    rest = list(stream)
    r = stream.result
    heard = first.frames + sum(c.frames for c in rest)
    assert r.stop_reason == "cancelled" and len(r.codes) == heard < 400
    assert len(r.audio) == heard * 1920 and r.timings.frames == heard


def test_the_setting_is_checked(monkeypatch):
    monkeypatch.setenv("KAZEIA_OVERLAP", "yes")
    with pytest.raises(ValueError, match="KAZEIA_OVERLAP='yes'"):
        default_overlap()
    monkeypatch.setenv("KAZEIA_OVERLAP", "1")
    assert default_overlap() is True
    one = Engine.load(demo_model_path(), threads=1)
    assert one.overlap and one.overlap_worker is None   # one thread: nothing to share, the stages take turns
    monkeypatch.setenv("KAZEIA_OVERLAP", "0")
    assert default_overlap() is False
    assert _native.ThreadPool(2).n_threads == 2
