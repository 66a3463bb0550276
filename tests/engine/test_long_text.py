"""Long texts through the engine: every chunk is exactly that chunk synthesized alone (batched or
not), one chunk can be made again with a new seed leaving the others, and any length goes through
`kazeia say` (the demo model: random weights, so every chunk runs to its frame limit)."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile

from kazeia.engine import ChunkedTake, Engine, Request, SamplingParams
from kazeia.engine.synthesis.long_text import chunk_request, redo_chunk
from kazeia.engine.synthesis.requests import MAX_TEXT_TOKENS, ONE_PROMPT
from kazeia.engine.text.compose import Cast, compose
from kazeia.engine.text.sentences import Budget

from support.commands import kazeia

TEXT = ("The first sentence is here. A second one follows it.\n\n"
        "Alice: A new paragraph, in another voice. [pause:300ms] And a last word.")


@pytest.fixture(scope="module")
def demo():
    from kazeia.engine import demo_model_path
    return Engine.load(demo_model_path(), threads=2)


def plan_of(engine, text=TEXT, seed=5):
    return compose(text, default=Cast(speaker="vivian"), cast={"Alice": Cast(speaker="serena")},
                   languages=engine.info.languages, budget=Budget(max_chars=40), seed=seed,
                   count_tokens=engine.count_text_tokens)


def take_of(engine, plan, sampling, max_batch=4, text=TEXT):
    """`plan` (a composition of `text`) spoken as a take of its chunks, `max_batch` at a time."""
    return engine.take(Request(text, sampling=sampling, plan=plan), batcher=engine.batcher(max_batch))


def alone(engine, chunk, sampling):
    return engine.take(chunk_request(chunk, sampling))


@pytest.mark.parametrize("max_batch", [1, 4])
def test_each_chunk_is_that_chunk_alone_bit_for_bit(demo, max_batch):
    plan = plan_of(demo)
    assert len(plan.chunks) == 4 and [c.cast.speaker for c in plan.chunks] == ["vivian", "vivian", "serena", "serena"]
    sampling = SamplingParams.from_model(demo.info, max_frames=6)
    result = take_of(demo, plan, sampling, max_batch)
    for take in result.chunks:
        single = alone(demo, take.plan, sampling)
        assert np.array_equal(take.result.codes, single.codes)
        assert np.array_equal(take.result.audio, single.audio)
    assert len({t.result.codes.tobytes() for t in result.chunks}) == 4   # seeds differ per chunk
    # the joined take holds each chunk where its span says (pauses between, crossfades at the edges)
    for take in result.chunks:
        start, end = take.span
        inner = slice(start + 480, end - 480)   # past the 5 ms fades at each edge (at most 120 samples)
        np.testing.assert_array_equal(result.audio[inner], take.result.audio[480:-480])
    assert len(result.warnings) == 4 and "frame limit" in result.warnings[0]   # random weights never stop
    assert result.ttfa_ms > 0 and result.total_ms >= result.ttfa_ms


def test_one_chunk_made_again_leaves_the_others(demo):
    sampling = SamplingParams.from_model(demo.info, max_frames=5)
    first = take_of(demo, plan_of(demo), sampling)
    again = redo_chunk(demo, first, 1, seed=424242, sampling=sampling)
    for i, (a, b) in enumerate(zip(first.chunks, again.chunks)):
        same = np.array_equal(a.result.audio, b.result.audio)
        assert same == (i != 1), i
    assert again.composition.chunks[1].seed == 424242
    # the other chunks' parts of the joined audio are untouched
    a0, b0 = first.chunks[0].span, again.chunks[0].span
    np.testing.assert_array_equal(first.audio[a0[0]:a0[1] - 120], again.audio[b0[0]:b0[1] - 120])
    a3, b3 = first.chunks[3].span, again.chunks[3].span
    np.testing.assert_array_equal(first.audio[a3[0] + 120:a3[1]], again.audio[b3[0] + 120:b3[1]])


def test_a_short_plain_text_is_what_it_was_before_the_front_end(demo):
    sampling = SamplingParams.from_model(demo.info, max_frames=6, seed=3)
    plan = compose("Just this.", default=Cast(speaker="ryan"), seed=3)
    result = take_of(demo, plan, sampling, text="Just this.")
    direct = demo.take(Request("Just this.", speaker="ryan", sampling=sampling))
    assert np.array_equal(result.audio, direct.audio)


def test_twenty_thousand_characters_through_say(tmp_path):
    sentences = [f"Sentence {i} of a very long chapter, with a clause; and a pause." for i in range(320)]
    paragraphs = ["\n".join(sentences[i:i + 16]) for i in range(0, len(sentences), 16)]
    text = "\n\n".join(paragraphs)
    assert len(text) >= 20_000
    (tmp_path / "chapter.txt").write_text(text, encoding="utf-8")
    out = tmp_path / "chapter.wav"
    r = kazeia("say", "--model", "demo", "--text-file", tmp_path / "chapter.txt", "--speaker", "vivian",
               "--max-frames", "1", "--batch", "8", "--pause-paragraph", "500", "-o", out, "--threads", "2",
               env={"KAZEIA_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-2000:]
    chunks = int(r.stdout.split(" chunk(s)")[0].rsplit(" ", 1)[1])
    assert chunks >= 20_000 // 250
    audio, sr = soundfile.read(out, dtype="float32")
    # one frame per chunk, 150 ms between chunks, 500 ms at the 19 paragraph breaks, less the fades
    expected = chunks * 1920 + (chunks - 1 - 19) * 3600 + 19 * 12000
    assert sr == 24000 and abs(len(audio) - expected) <= chunks * 240
    assert "Traceback" not in r.stderr and "frame limit" in r.stderr


def test_say_errors_in_markup_name_line_and_column(tmp_path):
    (tmp_path / "t.txt").write_text("Fine.\nThen [pause:forever] here.", encoding="utf-8")
    r = kazeia("say", "--model", "demo", "--text-file", tmp_path / "t.txt", "--speaker", "vivian",
               "-o", tmp_path / "a.wav", env={"KAZEIA_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 2 and "line 2, column 6" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "a.wav").exists()


def test_render_lines_may_be_paragraphs_markup_and_dialogue(tmp_path, demo):
    import csv
    long_line = " ".join(f"Sentence {i} of a line that is a whole chapter, with a clause; and more." for i in range(280))
    assert len(long_line) >= 20_000
    rows = [{"id": "plain", "text": "Just one sentence.", "speaker": "ryan", "max_frames": 4, "seed": 9},
            {"id": "dialogue", "text": "vivian: Hello there. [pause:250ms] serena: Hi!", "speaker": "ryan",
             "max_frames": 3, "seed": 1},
            {"id": "chapter", "text": long_line, "speaker": "vivian", "max_frames": 1, "seed": 2},
            {"id": "bad", "text": "Fine. [pause:never]", "speaker": "ryan", "max_frames": 1, "seed": 3}]
    script = tmp_path / "lines.csv"
    with open(script, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    out = tmp_path / "out"
    r = kazeia("render", script, "--model", "demo", "-o", out, "--batch", "4", "--threads", "2", "--skip-invalid",
               env={"KAZEIA_CACHE_DIR": str(tmp_path / "cache")})
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "3 rendered" in r.stdout and "1 skipped" in r.stdout, r.stdout + r.stderr[-2000:]
    manifest = [__import__("json").loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    bad = next(e for e in manifest if e["id"] == "bad")
    assert bad["status"] == "skipped" and "column 7" in bad["error"] and "not a duration" in bad["error"]
    plain, _ = soundfile.read(out / "plain.wav", dtype="float32")
    direct = demo.take(Request("Just one sentence.", speaker="ryan",
                               sampling=SamplingParams.from_model(demo.info, max_frames=4, seed=9)))
    np.testing.assert_array_equal(plain, direct.audio)   # a one-chunk line renders as it always did
    dialogue, _ = soundfile.read(out / "dialogue.wav", dtype="float32")
    plan = compose("vivian: Hello there. [pause:250ms] serena: Hi!", default=Cast(speaker="ryan"),
                   cast={"vivian": Cast(speaker="vivian"), "serena": Cast(speaker="serena")}, seed=1)
    assert [c.cast.speaker for c in plan.chunks] == ["vivian", "vivian"]   # (a turn starts a line only)
    assert len(dialogue) == 2 * 3 * 1920 + 6000   # two chunks of 3 frames and the 250 ms pause
    chapter, _ = soundfile.read(out / "chapter.wav", dtype="float32")
    assert len(chapter) > 80 * 1920


def test_bench_long_compares_a_batch_with_one_chunk_at_a_time(tmp_path):
    import json
    r = kazeia("bench", "--long", "--model", "demo", "--frames", "2", "--runs", "1", "--threads", "2",
               "--json", "-", "-q", env={"KAZEIA_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout[:r.stdout.rindex("}") + 1])
    assert result["stage"] == "long" and result["chunks"] > 1 and result["characters"] >= 1800
    assert result["frames"] == 2 * result["chunks"]   # every chunk capped at --frames
    assert result["batched_speedup"] > 0 and result["ttfa_vs_one_sentence"] > 0
    assert result["batched"]["ttfa_ms"] > 0 and result["one_sentence_ttfa_ms"] > 0
    from kazeia.engine.bench.report import summary
    table = summary(result)
    assert "one at a time" in table and "batch of 4" in table and "faster than one chunk at a time" in table


def test_engine_take_of_a_long_text_is_its_plan_spoken(demo):
    sampling = SamplingParams.from_model(demo.info, max_frames=4, seed=11)
    take = demo.take(Request("One sentence here. [pause:200ms] Another one there.", speaker="eric",
                             sampling=sampling))
    plan = compose("One sentence here. [pause:200ms] Another one there.", default=Cast(speaker="eric"), seed=11)
    assert [c.plan.text for c in take.chunks] == [c.text for c in plan.chunks]
    assert len(take.audio) == 2 * 4 * 1920 + 4800
    for c in take.chunks:
        np.testing.assert_array_equal(c.result.audio, alone(demo, c.plan, sampling).audio)
    with pytest.raises(ValueError, match="line 1, column 12: unknown voice 'nobody'.*vivian"):
        demo.take(Request("Hi. [voice=nobody] there.", speaker="eric"))


def test_a_chunked_take_is_the_joined_take_and_can_be_cancelled(demo):
    sampling = SamplingParams.from_model(demo.info, max_frames=6)
    plan = plan_of(demo)
    stream = demo.open_take(Request(TEXT, sampling=sampling, plan=plan), batcher=demo.batcher(4))
    parts = list(stream)
    whole = take_of(demo, plan, sampling)
    np.testing.assert_array_equal(np.concatenate([p.audio for p in parts]), whole.audio)
    np.testing.assert_array_equal(stream.result.audio, whole.audio)
    assert stream.result.codes.shape == (4 * 6, 16) and stream.result.stop_reason == "limit"
    assert parts[-1].timings.frames == 24 and len(parts[-1].timings.talker_ms) == 24
    assert [t.span for t in stream.takes] == [t.span for t in whole.chunks]
    # cancelled after the first audio: it stops, and what was streamed is the result's audio
    stream = demo.open_take(Request(TEXT, sampling=SamplingParams.from_model(demo.info, max_frames=60), plan=plan),
                            batcher=demo.batcher(4))
    heard = [next(stream).audio]
    stream.cancel()
    heard += [p.audio for p in stream]
    assert stream.result.stop_reason == "cancelled" and len(stream.result.codes) < 4 * 60
    np.testing.assert_array_equal(np.concatenate(heard), stream.result.audio)


@pytest.mark.slow
def test_render_applies_a_lexicon_and_resume_sees_it_change(tmp_path, demo):
    import pickle

    from kazeia.engine.text.lexicon import Lexicon
    (tmp_path / "lines.txt").write_text("Kazeia speaks.\nNothing to change here.\n", encoding="utf-8")
    rules = tmp_path / "rules.csv"
    rules.write_text("term,say\nKazeia,ka-ZAY-ah\n", encoding="utf-8")
    assert pickle.loads(pickle.dumps(Lexicon.load(rules))).apply("Kazeia", None, None)[0] == "ka-ZAY-ah"   # (Ray)
    env = {"KAZEIA_CACHE_DIR": str(tmp_path / "cache")}
    args = ["render", tmp_path / "lines.txt", "--model", "demo", "-o", tmp_path / "out", "--speaker", "ryan",
            "--lexicon", rules, "--threads", "2", "--resume"]
    r = kazeia(*args, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    first, _ = soundfile.read(tmp_path / "out" / "0001.wav", dtype="float32")
    frames = len(first) // 1920
    said = demo.take(Request("ka-ZAY-ah speaks.", speaker="ryan",
                             sampling=SamplingParams.from_model(demo.info, max_frames=frames)))
    np.testing.assert_array_equal(first, said.audio)
    r = kazeia(*args, env=env)   # unchanged: both kept
    assert "2 kept" in r.stdout, r.stdout
    rules.write_text("term,say\nKazeia,kah-zeh-yah\n", encoding="utf-8")
    r = kazeia(*args, env=env)   # the rules changed: both lines again (the rules are part of every request)
    assert "2 rendered" in r.stdout, r.stdout


def test_take_and_open_take_take_any_text(demo):
    sampling = SamplingParams.from_model(demo.info, max_frames=3, seed=4)
    text = "One sentence here. [pause:200ms] Another one there."
    take = demo.take(Request(text, speaker="eric", sampling=sampling))
    np.testing.assert_array_equal(demo.take(Request(text, speaker="eric", sampling=sampling, plan=demo.plan(
        Request(text, speaker="eric", sampling=sampling)).composition)).audio, take.audio)
    stream = demo.open_take(Request(text, speaker="eric", sampling=sampling))
    assert isinstance(stream, ChunkedTake)
    heard = np.concatenate([c.audio for c in stream])
    np.testing.assert_array_equal(heard, take.audio)
    assert stream.ended and stream.result.codes.shape == (6, 16)
    # wait() without iterating: the same take
    np.testing.assert_array_equal(demo.open_take(Request(text, speaker="eric", sampling=sampling)).wait().audio,
                                  take.audio)
    # a plain text of one chunk is the one prompt it always was (the reference's parity)
    plain = "Just a short one.\nOn two lines."
    np.testing.assert_array_equal(demo.take(Request(plain, speaker="eric", sampling=sampling)).audio,
                                  demo.take(Request(plain, speaker="eric", sampling=sampling, plan=ONE_PROMPT)).audio)
    # one prompt as written: brackets are words, not markup
    said = demo.take(Request("Say [pause:2s] as words.", speaker="eric", sampling=sampling, plan=ONE_PROMPT))
    assert len(said.codes) == 3
    with pytest.raises(ValueError, match="line 1, column 5"):
        demo.take(Request("Hi. [nonsense] there.", speaker="eric"))
    # beyond one prompt's limit: refused as one prompt, split into chunks otherwise
    long = " ".join(f"Sentence number {i} is here." for i in range(400))
    assert demo.count_text_tokens(long) > MAX_TEXT_TOKENS
    with pytest.raises(ValueError, match="split a text of any length"):
        demo.take(Request(long, speaker="eric", sampling=sampling, plan=ONE_PROMPT))
    one_frame = SamplingParams.from_model(demo.info, max_frames=1)
    result = demo.take(Request(long, speaker="eric", sampling=one_frame))
    assert len(result.codes) == len(demo.plan(Request(long, speaker="eric")).composition.chunks) > 1
