"""Text to codes against the reference: prompt embeddings, talker and code-predictor logits,
greedy codes and waveforms for every golden case; sampling, streaming, cancel, errors."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from kazeia import _native
from kazeia.engine import Engine, Request, SamplingParams, Voice, open_model
from kazeia.engine.synthesis.requests import ONE_PROMPT
from kazeia.engine.synthesis.prompt import PromptBuilder

from support.goldens import CASES, MANIFEST, case_request

pytestmark = pytest.mark.levels   # (numbers compared across paths: run again at every lower CPU level)


TOL = 1e-4


@pytest.mark.parity
@pytest.mark.parametrize("case", CASES)
def test_prompt_and_first_logits_match_reference(engines, case, report):
    variant, text, request, g = case_request(case)
    engine = engines(variant)
    plan = PromptBuilder(engine.model).build(text, **request)
    args = plan.arrays(engine.prompts.hidden)
    embeds = engine._runner.embed(**args)
    assert embeds.shape == g["talker_prefill_embeds"].shape
    e_err = float(np.abs(embeds - g["talker_prefill_embeds"]).max())
    logits, hidden = engine._runner.prefill(**args)
    l_err = float(np.abs(logits - g["talker_logits_raw"][0]).max())
    assert e_err <= TOL and l_err <= TOL
    assert float(np.abs(hidden - g["talker_last_hidden"][0]).max()) <= TOL
    assert len(plan.trailing_text_ids) == len(g["talker_trailing_text_embeds"])
    cp_err = 0.0
    for f in range(len(g["cp_logits"])):
        cp = engine._runner.code_predictor_logits(g["talker_last_hidden"][f], g["codes"][f])
        cp_err = max(cp_err, float(np.abs(cp - g["cp_logits"][f]).max()))
    assert cp_err <= TOL
    report(f"{case}: prompt embeds {e_err:.1e}, step-0 logits {l_err:.1e}, code-predictor logits {cp_err:.1e}")


@pytest.mark.arm64
@pytest.mark.parity
@pytest.mark.parametrize("case", CASES)
def test_greedy_codes_and_audio_match_reference(engines, case):
    variant, text, request, g = case_request(case)
    engine = engines(variant)
    frames = len(g["codes"])   # the reference ran max_new_tokens = frames + 1
    sampling = SamplingParams.from_model(engine.info, max_frames=frames).greedy()
    result = engine.take(Request(text, sampling=sampling, **request))
    assert np.array_equal(result.codes, g["codes"])
    assert result.stop_reason == "limit"
    assert result.audio.shape == g["wav"].shape
    assert float(np.abs(result.audio - g["wav"]).max()) <= TOL


def demo_engine(tmp_path_factory=None):
    from kazeia.engine import demo_model_path
    return Engine.load(demo_model_path(), threads=2)


@pytest.fixture(scope="module")
def demo():
    return demo_engine()


def test_seeded_sampling_is_repeatable(demo):
    s = SamplingParams.from_model(demo.info, seed=7, max_frames=12)
    a = demo.take(Request("Seeded runs repeat.", speaker="vivian", sampling=s))
    b = demo.take(Request("Seeded runs repeat.", speaker="vivian", sampling=s))
    c = demo.take(Request("Seeded runs repeat.", speaker="vivian",
                          sampling=SamplingParams.from_model(demo.info, seed=8, max_frames=12)))
    assert np.array_equal(a.codes, b.codes) and np.array_equal(a.audio, b.audio)
    assert not np.array_equal(a.codes, c.codes)
    assert a.codes.shape == (12, 16) and a.audio.shape == (12 * 1920,)


@pytest.mark.parametrize("top_k", [50, 0])
def test_one_launch_code_predictor_samples_like_the_step_path(demo, top_k):
    """In-graph Gumbel-max over top-k with host-drawn noise = the host sampler, code for code."""
    s = SamplingParams.from_model(demo.info, seed=11, max_frames=8, cp_top_k=top_k, cp_temperature=0.7)
    demo.cp_single_launch = True
    one = demo.take(Request("One launch per frame.", speaker="eric", sampling=s))
    demo.cp_single_launch = False
    steps = demo.take(Request("One launch per frame.", speaker="eric", sampling=s))
    demo.cp_single_launch = True
    assert np.array_equal(one.codes, steps.codes)
    assert len(np.unique(one.codes[:, 1:])) > 8   # really sampled, not constant


def test_persistent_talker_step_matches_the_rebuilt_graph(demo):
    """The talker step graph is built once per 64-key bucket and fed positions, cache rows and
    mask as inputs; it must compute what a graph rebuilt for every step computes."""
    greedy = SamplingParams.from_model(demo.info, max_frames=300).greedy()   # crosses a bucket boundary
    text = "One graph for every step."
    try:
        demo.talker_persistent = False
        rebuilt = demo.take(Request(text, speaker="vivian", sampling=greedy))
    finally:
        demo.talker_persistent = True
    persistent = demo.take(Request(text, speaker="vivian", sampling=greedy))
    assert len(persistent.codes) == 300 and np.array_equal(persistent.codes, rebuilt.codes)
    plan = demo.prompts.build(text, speaker="vivian")
    args = dict(plan.arrays(demo.prompts.hidden), trailing_text_ids=np.asarray(plan.trailing_text_ids, np.int32),
                codes=rebuilt.codes[:3], max_frames=300)
    la, ha = demo._runner.teacher_forced(**args, talker_persistent=False)
    lb, hb = demo._runner.teacher_forced(**args, talker_persistent=True)
    # the key axis differs (bucket vs exact), so only the summation order may differ
    assert np.abs(la - lb).max() <= 1e-4 * np.abs(la).max()


@pytest.mark.arm64
def test_stream_matches_synthesize_and_reports_timings(demo):
    s = SamplingParams.from_model(demo.info, seed=3, max_frames=10)
    full = demo.take(Request("Streaming gives the same audio.", speaker="ryan", sampling=s))
    stream = demo.open_take(Request("Streaming gives the same audio.", speaker="ryan", sampling=s))
    chunks = list(stream)
    # the first frame alone (time to first audio), then 4 per decoder launch, the rest at the end
    assert [(c.first_frame, c.frames) for c in chunks] == [(0, 1), (1, 4), (5, 4), (9, 1)]
    assert all(len(c.audio) == c.frames * 1920 for c in chunks)
    audio = np.concatenate([c.audio for c in chunks])
    assert np.array_equal(audio, full.audio)
    r = stream.result
    assert np.array_equal(r.codes, full.codes) and r.stop_reason == "limit"
    t = r.timings
    assert t.frames == 10 and len(t.talker_ms) == len(t.code_predictor_ms) == len(t.decoder_ms) == 10
    assert 0 < t.ttfa_ms <= t.total_ms and t.prefill_ms > 0 and t.rtf > 0
    assert "TTFA" in t.summary() and "code predictor" in t.summary()


def test_a_reused_kv_cache_gives_what_a_new_one_gives(demo):
    """The talker's caches go back to the engine and serve its next requests, zeroed only where
    written (a new one faulted in a thousand positions before the first frame); its positions are
    zeroed as they come into use. After a longer utterance, a shorter one on the reused cache equals
    the same request on a new engine, bit for bit, and so does a request after a batch."""
    short = SamplingParams.from_model(demo.info, seed=7, max_frames=12)
    fresh = demo_engine().take(Request("After a longer one.", speaker="vivian", sampling=short))
    demo.take(Request("A longer utterance first, to fill the cache with keys and values further on.",
                      speaker="vivian", sampling=SamplingParams.from_model(demo.info, seed=5, max_frames=90)))
    again = demo.take(Request("After a longer one.", speaker="vivian", sampling=short))
    assert np.array_equal(again.codes, fresh.codes) and np.array_equal(again.audio, fresh.audio)
    demo.take_many([Request(f"Batch line {i}.", speaker="ryan", sampling=SamplingParams.from_model(
        demo.info, seed=i, max_frames=20 + 10 * i)) for i in range(3)], max_batch=3)
    after = demo.take(Request("After a longer one.", speaker="vivian", sampling=short))
    assert np.array_equal(after.codes, fresh.codes) and np.array_equal(after.audio, fresh.audio)


@pytest.mark.parametrize("variant", ["custom_voice", "voice_design", "base"])
def test_warm_up_runs_on_every_variant_and_changes_no_result(converted, variant):
    """Engine.warm_up streams a few frames on any variant (Base: a silent x-vector); a stream after
    it equals the same stream on a new engine, bit for bit."""
    case = next(c for c in CASES if MANIFEST["cases"][c]["variant"] == variant)
    _, text, request, _ = case_request(case)
    path = converted(variant, "f32")
    warmed, fresh = Engine(open_model(path), threads=2), Engine(open_model(path), threads=2)
    warmed.warm_up()
    assert warmed.placement_report()   # the warm-up ran a synthesis
    sampling = SamplingParams.from_model(warmed.info, seed=3, max_frames=10)
    runs = []
    for engine in (warmed, fresh):
        stream = engine.open_take(Request(text, sampling=sampling, **request))
        audio = np.concatenate([chunk.audio for chunk in stream])
        runs.append((stream.result.codes, audio))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])


def test_consecutive_streams_reuse_one_decoder_session():
    """A finished stream's decoder session serves the engine's next one (reset): same audio as a
    new one, and as synthesize; a cancelled stream's is reused too."""
    demo = demo_engine()   # its own: the shared one keeps what earlier tests' streams gave back
    s = SamplingParams.from_model(demo.info, seed=3, max_frames=12)
    idle, audio = [], []
    for text in ("Another utterance first, longer than the next.", "Reused decoder.", "Reused decoder."):
        stream = demo.open_take(Request(text, speaker="vivian", sampling=s))
        audio.append(np.concatenate([c.audio for c in stream]))
        idle.append(list(demo.decoder._idle))   # what the finished stream handed back
    assert len(idle[0]) == 1 and idle[0] == idle[1] == idle[2] and idle[0][0] is idle[2][0]
    assert np.array_equal(audio[1], audio[2])
    assert np.array_equal(audio[2], demo.take(Request("Reused decoder.", speaker="vivian", sampling=s)).audio)
    stream = demo.open_take(Request("Stopped early.", speaker="vivian",
                                    sampling=SamplingParams.from_model(demo.info, seed=1, max_frames=200)))
    next(iter(stream))
    stream.cancel()
    list(stream)
    assert demo.decoder._idle == idle[0]
    again = demo.open_take(Request("Reused decoder.", speaker="vivian", sampling=s))
    assert np.array_equal(np.concatenate([c.audio for c in again]), audio[2])


def test_stream_decodes_every_frame_on_request(demo):
    s = SamplingParams.from_model(demo.info, seed=3, max_frames=6)
    full = demo.take(Request("Streaming gives the same audio.", speaker="ryan", sampling=s))
    chunks = list(demo.open_take(Request("Streaming gives the same audio.", speaker="ryan", sampling=s),
                                 decode_every=1))
    assert [(c.first_frame, c.frames) for c in chunks] == [(i, 1) for i in range(6)]
    assert np.array_equal(np.concatenate([c.audio for c in chunks]), full.audio)
    with pytest.raises(ValueError, match="decode_every"):
        demo.open_take(Request("x", speaker="ryan"), decode_every=0)


def test_cancel_stops_within_a_frame(demo):
    stream = demo.open_take(Request("A long text that would run for a while before the guard stops it.",
                                    speaker="aiden", sampling=SamplingParams.from_model(demo.info, max_frames=400)))
    first = next(stream)
    made_before_cancel = len(stream._codes)   # frames the worker had already finished
    stream.cancel()
    rest = list(stream)
    result = stream.result
    assert result.stop_reason == "cancelled"
    assert first.first_frame == 0
    # the result holds exactly the frames that were decoded and delivered (pending ones are dropped)
    delivered = first.frames + sum(c.frames for c in rest)
    assert len(result.codes) == delivered <= made_before_cancel + 1 and len(result.codes) < 400
    assert len(result.audio) == delivered * 1920 and result.timings.frames == delivered
    assert len(result.timings.talker_ms) == delivered


def test_gil_is_released_during_synthesis(demo):
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            stop.wait(0.001)
    t = threading.Thread(target=count)
    t.start()
    demo.take(Request("The interpreter keeps running meanwhile.", speaker="serena",
                      sampling=SamplingParams.from_model(demo.info, max_frames=60)))
    stop.set()
    t.join()
    # holding the GIL through native work would allow at most a tick before and after
    assert len(ticks) >= 5


def test_runaway_guard(demo):
    plan = demo.prompts.build("Short.", speaker="vivian")
    default = demo.max_frames_for(plan, SamplingParams())
    assert default >= 100 + 16 * plan.body_tokens - 1
    assert demo.max_frames_for(plan, SamplingParams(max_frames=5)) == 5
    r = demo.take(Request("Short.", speaker="vivian", sampling=SamplingParams(max_frames=5)))
    assert r.stop_reason == "limit" and len(r.codes) == 5


def test_clear_errors(demo, engines):
    with pytest.raises(ValueError, match="unknown speaker 'bob'; choose one of: serena"):
        demo.take(Request("hi", speaker="bob"))
    with pytest.raises(ValueError, match="unknown language 'elvish'; choose one of: auto, chinese"):
        demo.take(Request("hi", speaker="vivian", language="elvish"))
    with pytest.raises(ValueError, match="text is empty"):
        demo.take(Request("   ", speaker="vivian"))
    with pytest.raises(ValueError, match="needs a speaker"):
        demo.take(Request("hi"))
    with pytest.raises(ValueError, match="voice profiles need a Base model"):
        demo.take(Request("hi", speaker="vivian", voice=Voice(np.zeros(64, np.float32))))
    with pytest.raises(ValueError, match="temperature must be positive"):
        demo.take(Request("hi", speaker="vivian", sampling=SamplingParams(temperature=0)))
    vd = engines("voice_design")
    with pytest.raises(ValueError, match="no named speakers"):
        vd.take(Request("hi", speaker="vivian", instruct="calm"))
    with pytest.raises(ValueError, match="needs an instruction"):
        vd.take(Request("hi"))
    with pytest.raises(ValueError, match="text too long"):   # (planned as it comes it is split into chunks)
        demo.take(Request("word " * 20000, speaker="vivian", plan=ONE_PROMPT))
    base = engines("base")
    with pytest.raises(ValueError, match="cloned voice"):
        base.take(Request("hi"))
    with pytest.raises(ValueError, match="x-vector has 3 values"):
        base.take(Request("hi", voice=Voice(np.zeros(3, np.float32))))


def test_sampler_follows_the_warpers():
    logits = np.array([2.0, 1.0, 0.5, 0.0, -1.0], np.float32)
    cfg = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
    sampler = lambda c, seed, n: _native.sample_tokens(logits, _native.SamplingConfig(**c), seed, n)   # noqa: E731
    draws = sampler(cfg, 1, 20000)
    freq = np.bincount(draws, minlength=5) / len(draws)
    p = np.exp(logits) / np.exp(logits).sum()
    assert np.abs(freq - p).max() < 0.015
    assert np.array_equal(sampler(cfg, 1, 50), sampler(cfg, 1, 50))
    assert set(sampler({**cfg, "top_k": 2}, 2, 2000)) == {0, 1}
    assert set(sampler({**cfg, "top_p": 0.5}, 3, 500)) == {0}
    assert set(sampler({**cfg, "do_sample": False}, 4, 10)) == {0}
    cold = np.bincount(sampler({**cfg, "temperature": 0.5}, 5, 20000), minlength=5) / 20000
    p_cold = np.exp(logits / 0.5) / np.exp(logits / 0.5).sum()
    assert np.abs(cold - p_cold).max() < 0.015
