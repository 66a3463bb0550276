"""Many sessions on one model: a sequence's codes must not depend on what shares its steps. Greedy
golden cases inside batches of 1, 2, 4 and 8 (mixed with other requests of other lengths, some
joining late) against the reference; seeded sampling unchanged by the batch; cancel and early stops
leave the others untouched; several streams from threads share one batch."""
from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from kazeia import _native
from kazeia.engine import Engine, Request, SamplingParams, open_model
from kazeia.engine.synthesis.batch import Batcher
from kazeia.engine.synthesis.prompt_stream import build_prompt
from kazeia.engine.synthesis.requests import ONE_PROMPT

from support.goldens import CASES, MANIFEST, case_request


pytestmark = pytest.mark.levels   # (numbers compared across paths: run again at every lower CPU level)


def golden_request(engine, case):
    _, text, request, g = case_request(case)
    greedy = SamplingParams.from_model(engine.info, max_frames=len(g["codes"])).greedy()
    return Request(text, sampling=greedy, **request, plan=ONE_PROMPT), g


@pytest.mark.arm64
@pytest.mark.parity
@pytest.mark.parametrize("batch", [1, 2, 4, pytest.param(8, marks=pytest.mark.slow)])   # (8: minutes under emulation)
@pytest.mark.parametrize("variant", sorted({m["variant"] for m in MANIFEST["cases"].values()}))
def test_golden_cases_inside_a_batch_match_the_reference(engines, variant, batch, emulated):
    if emulated and batch == 1:   # (a batch of one steps as the goldens alone do, tests/engine/test_tts.py)
        pytest.skip("under emulation batches of 2 and 4 stand for this; x86-64 runs every size")
    engine = engines(variant)
    cases = [c for c in CASES if MANIFEST["cases"][c]["variant"] == variant]
    golden = [golden_request(engine, c) for c in cases]
    # the rest of the batch: the same texts, sampled, at other lengths (they leave early or late)
    fillers = []
    for i in range(max(batch - 1, 0) + 2 * batch):
        r, g = golden[i % len(golden)]
        fillers.append(replace(r, sampling=SamplingParams.from_model(engine.info, seed=100 + i, max_frames=3 + 5 * i)))
    requests = [r for r, _ in golden] + fillers   # more requests than slots: later ones join as others leave
    results = engine.take_many(requests, max_batch=batch)
    for (r, g), res in zip(golden, results):
        assert np.array_equal(res.codes, g["codes"]), r.text
        assert res.stop_reason == "limit"
        assert float(np.abs(res.audio - g["wav"]).max()) <= 1e-4
    for r, res in zip(fillers, results[len(golden):]):
        assert len(res.codes) == r.sampling.max_frames or res.stop_reason == "eos"


@pytest.fixture(scope="module")
def demo():
    from kazeia.engine import demo_model_path
    return Engine.load(demo_model_path(), threads=2)


def sampled(engine, seed, frames, **kw):
    return SamplingParams.from_model(engine.info, seed=seed, max_frames=frames, **kw)


def test_seeded_sampling_does_not_depend_on_the_batch(demo):
    texts = ["The same seed gives the same voice.", "Other company.", "A third request, longer than the rest.",
             "Short."]
    speakers = ["vivian", "ryan", "eric", "serena"]
    requests = [Request(t, speaker=s, sampling=sampled(demo, 7 + i, 20 + 3 * i, temperature=0.6 + 0.1 * i))
                for i, (t, s) in enumerate(zip(texts, speakers))]
    alone = [demo.take(r) for r in requests]
    together = demo.take_many(requests, max_batch=4)
    for a, b in zip(alone, together):
        assert np.array_equal(a.codes, b.codes) and np.array_equal(a.audio, b.audio)
    assert len({a.codes.tobytes() for a in alone}) == len(alone)   # really different requests


def native_requests(engine, n):
    texts = ["Two runners share one set of weights.", "Each has its own graphs.", "A third one."]
    out = []
    for i in range(n):
        request = Request(texts[i % len(texts)], speaker=["vivian", "ryan", "eric"][i % 3],
                          sampling=sampled(engine, 11 + i, 30 + 5 * i))
        out.append(engine._request(build_prompt(engine, request), request.sampling))
    return out


def run_on_threads(jobs, timeout=120):
    """Each job on its own thread, started together; their results (an exception fails the test)."""
    results, errors = [None] * len(jobs), []
    start = threading.Barrier(len(jobs))

    def run(i):
        try:
            start.wait()
            results[i] = jobs[i]()
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a runner did not finish"
    assert not errors, errors
    return results


def test_two_runners_on_one_set_of_weights_run_at_once_and_match_alone(demo):
    """The weights are bound once; two runners over them (each with its own pool, so on two threads
    at the same time) give every request exactly the codes it gets alone, again and again; runners
    that share one pool take turns and give the same."""
    requests = native_requests(demo, 2)
    alone = [demo._runner.generate(r, None)["codes"] for r in requests]
    assert not np.array_equal(alone[0][:10], alone[1][:10])   # really different requests

    def repeated(runner, request):
        return lambda: [runner.generate(request, None)["codes"] for _ in range(3)]
    own = [_native.TtsRunner(demo._weights, _native.ThreadPool(1)) for _ in requests]
    shared_pool = _native.ThreadPool(2)
    shared = [_native.TtsRunner(demo._weights, shared_pool) for _ in requests]
    for runners in (own, shared):
        for got, want in zip(run_on_threads([repeated(r, q) for r, q in zip(runners, requests)]), alone):
            assert all(np.array_equal(g, want) for g in got)


def test_a_session_is_stepped_by_any_runner_of_its_weights_and_refused_by_others(demo):
    request = native_requests(demo, 1)[0]
    alone = demo._runner.generate(request, None)["codes"]
    a, b = (_native.TtsRunner(demo._weights, _native.ThreadPool(1)) for _ in range(2))
    session = a.open(request)
    turn = 0
    while not session.done:
        (a, b)[turn % 2].step([session])
        turn += 1
    assert np.array_equal(session.result()["codes"], alone)
    other = _native.TtsRunner(_native.TtsWeights(demo.model.native), _native.ThreadPool(1))
    with pytest.raises(ValueError, match="a session of other weights"):
        other.step([a.open(request)])


def test_streams_from_threads_run_in_one_batch_and_one_can_be_cancelled(demo):
    engine = Engine(demo.model, threads=2, max_batch=4)
    texts = [f"Stream number {i} speaks while the others do." for i in range(4)]
    alone = [demo.take(Request(t, speaker="vivian", sampling=sampled(demo, i, 40))) for i, t in enumerate(texts)]
    results, cancelled = [None] * 4, {}
    started = threading.Barrier(4)

    def listen(i):
        started.wait()
        stream = engine.open_take(Request(texts[i], speaker="vivian", sampling=sampled(demo, i, 40)))
        for n, chunk in enumerate(stream):
            if i == 3 and n == 1:   # one listener gives up after two chunks
                stream.cancel()
                cancelled["delivered"] = chunk.first_frame + chunk.frames
        results[i] = stream.result
    threads = [threading.Thread(target=listen, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert engine.shared_batcher.largest_batch >= 2   # they really shared steps
    for i in range(3):
        assert np.array_equal(results[i].codes, alone[i].codes) and np.array_equal(results[i].audio, alone[i].audio)
    r = results[3]
    assert r.stop_reason == "cancelled" and len(r.codes) >= cancelled["delivered"] and len(r.codes) < 40
    assert np.array_equal(r.codes, alone[3].codes[:len(r.codes)])


def test_a_late_joiner_and_a_bad_request_leave_the_others_untouched(demo):
    engine = Engine(demo.model, threads=2, max_batch=3)
    first = engine.open_take(Request("The first one starts alone.", speaker="ryan", sampling=sampled(demo, 1, 30)))
    next(first)
    late = engine.open_take(Request("The second joins later.", speaker="ryan", sampling=sampled(demo, 2, 10)))
    a, b = first.wait(60), late.wait(60)
    assert np.array_equal(a.codes, demo.take(Request("The first one starts alone.", speaker="ryan",
                                                     sampling=sampled(demo, 1, 30))).codes)
    assert np.array_equal(b.codes, demo.take(Request("The second joins later.", speaker="ryan",
                                                     sampling=sampled(demo, 2, 10))).codes)
    with pytest.raises(ValueError, match="speaker"):
        engine.take_many([Request("Fine.", speaker="ryan"), Request("Bad.", speaker="nobody")])


@pytest.mark.arm64
@pytest.mark.parametrize("type_", ["q8_0", "q6_k", "q5_k"])
def test_a_sequence_alone_and_in_a_batch_at_full_block_counts(tmp_path_factory, type_, emulated):
    """The tiny goldens' rows hold two q8_0 blocks, where every product sums alike; a "small" model's
    rows hold several (q8_0) or whole q6_K and q5_K blocks, so the kernels' four-accumulator paths run as at
    full size. The code predictor feeds two rows at its first sub-step: alone they must be summed as
    in a batch (this caught a single path that used ggml's multi-column product there)."""
    from kazeia.engine import make_random_model
    path = make_random_model(tmp_path_factory.mktemp("small") / f"small-{type_}.gguf", size="small",
                             out_type=type_, progress=False)
    engine = Engine(open_model(path), threads=2)
    assert engine.info.stage_type("code_predictor") == type_.replace("_k", "_K")
    texts = ["One sequence alone and in company.", "Another voice.", "A third, longer request than the others.",
             "Four."]
    # (under emulation, sampled only: greedy runs the same products, minutes more under qemu)
    for greedy in (False,) if emulated else (True, False):
        def sampling(i):
            s = sampled(engine, 5 + i, 14 + 2 * i)
            return s.greedy() if greedy else s
        requests = [Request(t, speaker="ryan", sampling=sampling(i)) for i, t in enumerate(texts)]
        alone = [engine.take(r) for r in requests]
        together = engine.take_many(requests, max_batch=4)
        for a, b in zip(alone, together):
            assert np.array_equal(a.codes, b.codes) and np.array_equal(a.audio, b.audio)


@pytest.mark.parametrize("type_", ["q8_0", "q6_k", "q5_k", "f16"])
def test_code_predictor_logits_do_not_depend_on_the_batch(tmp_path_factory, type_):
    """Bit for bit: each frame's 15 sub-step logits in a batch of 4 = alone = the step-by-step path."""
    from kazeia.engine import make_random_model
    path = make_random_model(tmp_path_factory.mktemp("small") / f"small-{type_}.gguf", size="small",
                             out_type=type_, progress=False)
    engine = Engine(open_model(path), threads=2)
    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((4, engine._weights.hidden_size)).astype(np.float32)
    c0 = np.array([5, 900, 17, 2000], np.int32)
    codes, logits = engine._runner.code_predictor_frames(hidden, c0)
    for b in range(4):
        alone_codes, alone_logits = engine._runner.code_predictor_frames(hidden[b:b + 1], c0[b:b + 1])
        assert np.array_equal(alone_codes[0], codes[b]) and np.array_equal(alone_logits[0], logits[b])
        frame = np.concatenate([[c0[b]], codes[b]]).astype(np.int32)
        steps = engine.code_predictor_logits(hidden[b], frame)   # sub-steps launched one by one
        assert np.array_equal(steps, logits[b])
    assert len(np.unique(codes)) > 4


def test_a_script_that_cancels_a_take_and_exits_ends_cleanly():
    """A script that cancels a long take and exits at once, its batch worker still inside a native
    step, ends with status 0 (before, most such runs aborted as the interpreter finalized): the
    workers are stopped at exit."""
    import subprocess
    import sys
    from kazeia.engine import demo_model_path
    # (the demo model: a step long enough to be inside; the bench's and server's modules loaded:
    # finalizing takes long enough for the worker to wake inside it)
    script = ("import kazeia.engine.bench.agent\n"
              "from kazeia.engine import Engine, Request, open_model\n"
              f"engine = Engine(open_model({str(demo_model_path())!r}), threads=2, max_batch=2)\n"
              "for _ in range(2):\n"
              "    text = ('Sure, here is the short version. The train leaves at nine from platform four, and the '\n"
              "            'trip takes about two hours.\\n\\n') * 3\n"
              "    take = engine.open_take(Request(text, speaker='vivian', streaming_text=True))\n"
              "    next(iter(take))\n"
              "    take.cancel()\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


class _Session:
    """A native session's face to the batch worker: two frames, then done."""
    waiting = False

    def __init__(self, name):
        self.name, self.n_frames = name, 0

    @property
    def done(self):
        return self.n_frames >= 2

    def frame(self, index):
        return np.zeros(16, np.int32), 1.0, 1.0

    def result(self):
        return {"prefill_ms": 0.0, "codes": np.zeros((self.n_frames, 16), np.int32), "stop_reason": "limit"}


class _Stream:
    """An audio stream's runner side; `arrivals`: streams submitted while this one is prefilled."""
    feed, cancelled = None, False

    def __init__(self, name, batcher, arrivals=(), follows=False):
        self.name, self._batcher, self._arrivals, self.frames_seen = name, batcher, arrivals, 0
        self.follows, self.after = follows, None
        self._ended = threading.Event()

    @property
    def ended(self):
        return self._ended.is_set()

    def wait(self, timeout):
        return self._ended.wait(timeout)

    def open_session(self):
        for other in self._arrivals:
            self._batcher.submit(other)
        return _Session(self.name)

    def on_frame(self, index, codes, talker_ms, cp_ms, prefill_ms):
        self.frames_seen = index + 1
        return True

    def waiting_for_text(self):
        pass

    def finish(self, out, cancelled=False):
        self._ended.set()

    def fail(self, error):
        self._ended.set()


class _Host:
    lock = threading.Lock()

    def __init__(self):
        self.steps = []

    def step(self, sessions):
        self.steps.append([s.name for s in sessions])
        for s in sessions:
            s.n_frames += 1


def test_streams_arriving_during_a_prefill_share_the_first_step():
    """Streams that start together (sockets of one burst) each need a prefill; those that arrive
    while one is prefilled are prefilled before the next step, so their first frames come from one
    step rather than each waiting for the first frame (and first decode) of the one before. At most
    max_batch join; the rest wait their turn."""
    host = _Host()
    batcher = Batcher(host, max_batch=3)
    late = [_Stream(name, batcher) for name in "bcd"]
    first = _Stream("a", batcher, arrivals=late[:1])
    late[0]._arrivals = late[1:]   # (c and d arrive while b is prefilled)
    batcher.submit(first)
    for s in [first, *late]:
        assert s.wait(10)
    assert host.steps[0] == ["a", "b", "c"]   # d: over max_batch, it waits for a slot
    assert ["d"] in host.steps and batcher.largest_batch == 3


def test_a_takes_first_chunk_is_admitted_before_later_chunks_of_others():
    """Four takes of two chunks each, submitted at once (a burst of whole answers): with three slots,
    every take's first chunk (a listener waiting for first audio) goes before any second chunk (its
    audio is needed only once the first has played), in arrival order within each kind."""
    host = _Host()
    batcher = Batcher(host, max_batch=3)
    waiting = []
    for take in "abcd":
        waiting += [_Stream(take + "1", batcher), _Stream(take + "2", batcher, follows=True)]
    first = _Stream("x1", batcher, arrivals=waiting)
    batcher.submit(first)
    for s in [first, *waiting]:
        assert s.wait(10)
    assert host.steps[0] == ["x1", "a1", "b1"]
    joined = [name for step in host.steps for name in step]
    order = sorted(set(joined), key=joined.index)
    assert order.index("d1") < min(order.index(t + "2") for t in "abcd"), order


def test_a_later_chunk_is_prefilled_after_its_takes_first_frame():
    """A whole answer at once (a burst): its second chunk, arriving while the first is prefilled,
    waits for one step, so the first audio does not wait for its prefill; it joins at the next."""
    host = _Host()
    batcher = Batcher(host, max_batch=4)
    second = _Stream("x2", batcher, follows=True)
    first = _Stream("x1", batcher, arrivals=[second])
    batcher.submit(first)
    assert first.wait(10) and second.wait(10)
    assert host.steps[:2] == [["x1"], ["x1", "x2"]]


def test_a_live_takes_next_chunk_is_made_once_the_one_before_it_is():
    """A live take's chunks are made one after another (PromptStream.after): side by side, each of one
    listener's chunks goes slower, on a small machine slower than real time. Another take's first
    chunk is not held back by it."""
    host = _Host()
    batcher = Batcher(host, max_batch=4)
    first = _Stream("a1", batcher)
    second = _Stream("a2", batcher, follows=True)
    second.after = first
    other = _Stream("b1", batcher)
    first._arrivals = [second, other]
    batcher.submit(first)
    for s in (first, second, other):
        assert s.wait(10)
    assert host.steps[0] == ["a1", "b1"]
    assert all("a2" not in step for step in host.steps[:2]) and ["a2"] in host.steps   # (a1 makes two frames)


