"""A text still being written (an LLM's answer) spoken as one utterance: the session reads each text
id as it arrives and waits, stepping nothing, when it has read all there is. Property: any split of
the text and any timing give the codes of the whole text given at once with streaming text (same
seed), alone and inside a batch of sessions that never wait."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia.engine import Request, SamplingParams
from kazeia.engine.synthesis.prompt_stream import build_prompt
from kazeia.engine.synthesis.requests import MAX_HOLD_MS, ONE_PROMPT
from kazeia.engine.text.final_tokens import FinalTokens

pytestmark = pytest.mark.levels   # (numbers compared across paths: run again at every lower CPU level)


TEXTS = ["Hello! This answer arrives a few characters at a time, as a language model writes it.",
         "Numbers like 3.14159 and 2,048, a café, and 日本語 too.\nA second line."]


def sampling_of(engine, seed):
    return SamplingParams.from_model(engine.info, seed=seed)   # (sampled; the frame limit from the text)


def whole_prompt(engine, text, seed):
    """(the whole text's prompt, with streaming text; its sampling)."""
    request = Request(text, speaker="vivian", sampling=sampling_of(engine, seed), streaming_text=True)
    return build_prompt(engine, request), request.sampling


def whole_session(engine, text, seed):
    return engine.open_session(*whole_prompt(engine, text, seed))


class Writer:
    """A text written into a session delta by delta (FinalTokens decides which ids are final)."""

    def __init__(self, engine, text, seed, cuts):
        self.engine, self.text, self.seed = engine, text, seed
        self.deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        self.streamed = FinalTokens(engine.prompts.tok)
        self.session = None
        self.pending: list[int] = []

    def write_next(self) -> bool:
        """One more delta (or the close); False once everything is written."""
        if self.streamed.closed:
            return False
        if self.deltas:
            self.pending += self.streamed.push(self.deltas.pop(0))
        else:
            self.pending += self.streamed.close() + [self.engine.prompts.text["tts_eos"]]
        if self.session is None and self.pending:   # the prompt needs the first id
            plan = self.engine.prompts.build("", speaker="vivian", streaming_text=True,
                                             first_ids=self.pending[:1])
            self.session = self.engine.open_session(plan, sampling_of(self.engine, self.seed), text_open=True)
            self.pending = self.pending[1:]
        if self.session is not None and self.pending:
            self.session.append_text(np.asarray(self.pending, np.int32))
            self.pending = []
        if self.streamed.closed and self.session is not None:
            whole_tokens = len(self.streamed.given)
            plan, sampling = whole_prompt(self.engine, self.text, self.seed)
            assert plan.body_tokens == whole_tokens
            self.session.close_text(self.engine.max_frames_for(plan, sampling))
        return True


@pytest.mark.parametrize("split_seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_a_text_written_while_it_is_spoken_gives_the_whole_texts_codes(engines, split_seed):
    engine = engines("custom_voice")
    rng = np.random.default_rng(split_seed)
    waited = 0
    with engine.lock:
        for i, text in enumerate(TEXTS):
            seed = 11 + i
            expected = whole_session(engine, text, seed)
            cuts = sorted(set(rng.integers(1, len(text), size=int(rng.integers(8, 25))).tolist()))
            writer = Writer(engine, text, seed, cuts)
            neighbours = [whole_session(engine, t, 40 + k) for k, t in enumerate(("Beside it.", "And another one."))]
            while not writer.streamed.closed:
                # the writer is late at random: a few frames of the others go by before each delta
                for _ in range(int(rng.integers(0, 4))):
                    if writer.session is not None and writer.session.waiting:
                        waited += 1
                    engine.step([s for s in (writer.session, *neighbours, expected) if s is not None])
                writer.write_next()
            while not (writer.session.done and expected.done):
                engine.step([writer.session, expected, *neighbours])
            got, want = writer.session.result(), expected.result()
            assert np.array_equal(got["codes"], want["codes"]), (text, writer.deltas)
            assert got["codes"].shape[0] > 10
    assert waited > 0   # (the sessions did wait for text)


def test_a_waiting_session_steps_nothing_and_a_closed_text_takes_no_more(engines):
    engine = engines("custom_voice")
    with engine.lock:
        plan = engine.prompts.build("", speaker="vivian", streaming_text=True,
                                    first_ids=engine.prompts.tok.encode("Hello")[:1])
        session = engine.open_session(plan, sampling_of(engine, 3), text_open=True)
        engine.step([session])   # frame 0 needs no trailing text
        assert session.n_frames == 1 and session.waiting
        for _ in range(3):
            engine.step([session])
        assert session.n_frames == 1   # nothing fed, nothing made
        session.append_text(np.asarray([engine.prompts.text["tts_eos"]], np.int32))
        session.close_text(8)
        while not session.done:
            engine.step([session])
        assert 1 < session.n_frames <= 8 and not session.waiting
        with pytest.raises(Exception, match="closed"):
            session.append_text(np.asarray([1], np.int32))


def live(engine, speaker="vivian", **request):
    """A live take on `engine`: its text written on as it comes (Engine.open_take, text_open)."""
    return engine.open_take(Request("", speaker=speaker, **request), text_open=True)


def speak_as_written(engine, written, deltas, rng, most_s, after_write=lambda: None):
    """`deltas` written into `written` by a thread at random moments (up to `most_s` apart), closed,
    while another stream shares the batch; (the audio chunks heard, the result)."""
    import threading
    import time
    beside = engine.open_take(Request("A neighbour in the same batch.", speaker="ryan",
                                      sampling=SamplingParams.from_model(engine.info, seed=9)))

    def write() -> None:
        for delta in deltas:
            time.sleep(float(rng.uniform(0, most_s)))
            written.write(delta)
            after_write()
        written.close()
    writer = threading.Thread(target=write)
    writer.start()
    chunks = list(written)
    writer.join(60)
    got = written.wait(300)
    beside.wait(120)
    return chunks, got


def test_the_engines_text_stream_speaks_the_whole_texts_audio(converted):
    """Engine.open_take(text_open=True): a writer thread sends deltas at random moments while another
    stream shares the batch; the audio equals the whole text's (streaming_text=True) bit for bit."""
    from kazeia.engine import Engine, open_model
    engine = Engine(open_model(converted("custom_voice")), threads=2, max_batch=4)
    text = TEXTS[1]
    sampling = SamplingParams.from_model(engine.info, seed=5)
    whole = engine.open_take(Request(text, speaker="vivian", sampling=sampling, streaming_text=True,
                                     plan=ONE_PROMPT)).wait(120)
    rng = np.random.default_rng(3)
    cuts = sorted(set(rng.integers(1, len(text), size=12).tolist()))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    written = live(engine, sampling=SamplingParams.from_model(engine.info, seed=5))
    chunks, got = speak_as_written(engine, written, deltas, rng, 0.05)
    assert chunks and np.array_equal(np.concatenate([c.audio for c in chunks]), got.audio)
    assert np.array_equal(got.codes, whole.codes) and np.array_equal(got.audio, whole.audio)
    assert written.one_prompt   # (the text as written, a line break in it: the reference's prompt)
    empty = live(engine)
    empty.write("  \n  ")
    with pytest.raises(ValueError, match="text is empty"):
        empty.close()
    empty.wait(60)   # (cancelled, if the spaces had opened a session)
    with pytest.raises(ValueError, match="speaker"):
        live(engine, speaker="nobody")


def test_a_waiting_stream_has_its_frames_decoded_while_the_writer_thinks(converted):
    """Frames made before the session runs out of text are heard at once, not when a decoder
    launch's worth (decode_every) has gathered: the listener is not kept from what is made."""
    import threading
    import time

    from kazeia.engine import Engine, open_model
    engine = Engine(open_model(converted("custom_voice")), threads=2, max_batch=2)
    sampling = SamplingParams.from_model(engine.info, seed=2)
    written = engine.open_take(Request("", speaker="vivian", sampling=sampling), text_open=True, decode_every=64)
    heard = []
    listener = threading.Thread(target=lambda: heard.extend(c.frames for c in written), daemon=True)
    listener.start()
    written.write("An answer that stops to think here, and")
    steps, still_since, deadline = -1, time.perf_counter(), time.perf_counter() + 60
    while time.perf_counter() - still_since < 0.5 and time.perf_counter() < deadline:   # (until it waits)
        if engine.shared_batcher.steps != steps:
            steps, still_since = engine.shared_batcher.steps, time.perf_counter()
        time.sleep(0.02)
    made = written.streams[0].frames_made
    time.sleep(0.2)
    assert 1 < made < 64 and sum(heard) == made
    written.cancel()
    listener.join(30)


LONG_ANSWER = ("Sure, here is the plan for tomorrow. [pause:300ms] We meet at 10:30, then walk to the old harbour; "
               "the boats leave at noon.\n\nIn the afternoon, if the weather holds, we take the ferry across the bay "
               "and come back before dark.")


def test_a_long_answer_written_as_it_is_spoken_is_the_whole_texts_take(converted):
    """A live take (Engine.open_take, text_open) of an answer the long-text front end cuts into chunks
    (a pause tag, a paragraph): each chunk begins as soon as its words are known, and the take equals
    Engine.take(the whole text, streaming_text=True), chunks, seeds, pauses, audio, bit for bit,
    with another stream in the batch and the deltas at random moments."""
    import time

    from kazeia.engine import Engine, open_model
    engine = Engine(open_model(converted("custom_voice")), threads=2, max_batch=4)
    # (48 frames a chunk: each reads all its text by then; random weights would run on to the limit)
    sampling = SamplingParams.from_model(engine.info, seed=11, max_frames=48)
    whole = engine.take(Request(LONG_ANSWER, speaker="vivian", sampling=sampling, streaming_text=True))
    assert len(whole.composition.chunks) == 3
    rng = np.random.default_rng(5)
    cuts = sorted(set(rng.integers(1, len(LONG_ANSWER), size=40).tolist()))
    deltas = [" " + LONG_ANSWER[:cuts[0]]] + [LONG_ANSWER[a:b] for a, b in zip(cuts, [*cuts[1:], len(LONG_ANSWER)])]
    written = live(engine, sampling=SamplingParams.from_model(engine.info, seed=11, max_frames=48))
    begun = []

    def after_write() -> None:
        # the last words' chunk begins before the text closes: at once, or, when the live take gathered
        # them (the model still had text of the chunk before to read), unasked once that runs low
        deadline = time.perf_counter() + (30 if len(begun) == len(deltas) - 1 else 0)
        while len(written.streams) < 3 and time.perf_counter() < deadline:
            time.sleep(0.005)
        begun.append(len(written.streams))
    chunks, got = speak_as_written(engine, written, deltas, rng, 0.03, after_write)
    assert begun[-1] == 3 and written.composition.pieces == whole.composition.pieces and not written.one_prompt
    assert [t.plan.text for t in written.takes] == [t.plan.text for t in whole.chunks]
    assert np.array_equal(np.concatenate([c.audio for c in chunks]), got.audio)
    assert np.array_equal(got.codes, whole.codes) and np.array_equal(got.audio, whole.audio)


def test_a_held_start_waits_for_its_text_and_speaks_the_same_audio(converted):
    """hold_ms: nothing is spoken until the text written holds that much reading (one token a frame),
    or the text ends; what is spoken then is the same audio as with no hold."""
    from kazeia.engine import Engine, open_model
    engine = Engine(open_model(converted("custom_voice")), threads=2, max_batch=2)
    text = TEXTS[0]
    sampling = SamplingParams.from_model(engine.info, seed=4)
    whole = engine.open_take(Request(text, speaker="vivian", sampling=sampling, streaming_text=True,
                                     plan=ONE_PROMPT)).wait(120)
    hold_ms = 800.0
    hold_tokens = hold_ms / 1000 * engine.info.frame_rate   # 10 tokens
    held = live(engine, sampling=SamplingParams.from_model(engine.info, seed=4), hold_ms=hold_ms)
    steps, written = engine.shared_batcher.steps, ""
    for word in text.split(" "):
        written += ("" if not written else " ") + word
        held.write(word if written == word else " " + word)
        if engine.count_text_tokens(written) < hold_tokens:
            assert not held.streams and engine.shared_batcher.steps == steps, written   # (held: nothing runs)
    assert held.streams   # (the text held enough)
    held.close()
    got = held.wait(120)
    assert np.array_equal(got.codes, whole.codes) and np.array_equal(got.audio, whole.audio)
    short = live(engine, sampling=SamplingParams.from_model(engine.info, seed=4), hold_ms=MAX_HOLD_MS)
    short.write("Hi there.")
    assert not short.streams
    short.close()   # (the text ended: spoken though it holds less than the hold)
    assert short.wait(120).codes.shape[0] > 0
    with pytest.raises(ValueError, match="hold_ms"):
        live(engine, hold_ms=-1)


def test_a_live_take_gathers_deltas_while_the_model_has_text_to_read(converted, monkeypatch):
    """write() plans the text written only while the model has less than GATHER_WHILE_UNREAD tokens of
    the chunk being written left to read; meanwhile deltas gather, planned once the model runs low (no
    write needed) or at close: an answer written word by word is planned a few times, not once a word,
    and its take is the whole text's. (The model is held still while the words come: it reads none.)"""
    import time

    from kazeia.engine import Engine, open_model
    from kazeia.engine.synthesis import live_take
    engine = Engine(open_model(converted("custom_voice")), threads=2, max_batch=2)
    sampling = SamplingParams.from_model(engine.info, seed=11, max_frames=48)
    whole = engine.take(Request(LONG_ANSWER, speaker="vivian", sampling=sampling, streaming_text=True))
    planned, plan_open = [], live_take.compose_open
    monkeypatch.setattr(live_take, "compose_open", lambda text, **args: planned.append(text) or plan_open(text, **args))
    written = live(engine, sampling=SamplingParams.from_model(engine.info, seed=11, max_frames=48))
    words = LONG_ANSWER.split(" ")
    with engine.lock:   # (no frame is made: what is written stays unread)
        for i, word in enumerate(words):
            written.write(word if i == 0 else " " + word)
        assert written.unread_tokens() >= live_take.GATHER_WHILE_UNREAD
        assert len(planned) < len(words) // 2 and planned[-1] != LONG_ANSWER   # (the later words gathered)
    deadline = time.perf_counter() + 60
    while planned[-1] != LONG_ANSWER:   # the model reads on, runs low: what gathered is planned, unasked
        assert time.perf_counter() < deadline
        time.sleep(0.02)
    written.close()
    got = written.wait(300)
    assert np.array_equal(got.codes, whole.codes) and np.array_equal(got.audio, whole.audio)
