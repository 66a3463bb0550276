"""Numbers from outside (issue 57): sampling fields, the command line's options and the pauses a text
asks for are finite and bounded, and checked when the request is planned, before the model loads or
any chunk is made; each bad one gives one line naming the field (exit code 2 through the CLI)."""
from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.commands import kazeia

FIELDS = ("temperature", "top_k", "top_p", "repetition_penalty", "cp_temperature", "cp_top_k", "cp_top_p",
          "max_frames", "seed")
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2 ** 70, 2 ** 70), st.booleans(),
                    st.none(), st.text(max_size=3))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), numbers, max_size=4))
def test_sampling_is_finite_and_in_range_or_refused_naming_the_field(values):
    from kazeia.engine.synthesis.requests import (MAX_FRAMES, MAX_REPETITION_PENALTY, MAX_TEMPERATURE, MAX_TOP_K,
                                        SamplingParams)
    from kazeia.engine.untrusted import InputError
    params = SamplingParams(**values)
    try:
        params.validate()
    except InputError as e:
        assert str(e).split(" ")[0] in FIELDS and "\n" not in str(e)
        return
    for name in ("temperature", "cp_temperature"):
        assert math.isfinite(getattr(params, name)) and 0 < getattr(params, name) <= MAX_TEMPERATURE
    for name in ("top_p", "cp_top_p"):
        assert 0 < getattr(params, name) <= 1
    for name in ("top_k", "cp_top_k"):
        assert getattr(params, name) == int(getattr(params, name)) and 0 <= getattr(params, name) <= MAX_TOP_K
    assert math.isfinite(params.repetition_penalty) and 0 < params.repetition_penalty <= MAX_REPETITION_PENALTY
    assert params.max_frames is None or 1 <= params.max_frames <= MAX_FRAMES
    assert 0 <= params.seed < 2 ** 64


SAY_BAD = [("--temperature", "nan"), ("--temperature", "inf"), ("--temperature", "0"), ("--top-k", "99999999999"),
           ("--top-k", "-1"), ("--top-p", "nan"), ("--top-p", "1.5"), ("--max-frames", "0"),
           ("--max-frames", "1000000000"), ("--seed", "-1"), ("--seed", str(2 ** 64)), ("--pause-sentence", "nan"),
           ("--pause-paragraph", "inf"), ("--max-chars", "100000000"), ("--max-tokens", "3"), ("--batch", "0"),
           ("--batch", "100000")]


def _fails_before_the_model_loads(monkeypatch, capsys, argv, option):
    from kazeia.engine.synthesis import engine as synthesis
    from kazeia.engine.cli import main

    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the numbers were checked")
    monkeypatch.setattr(synthesis.Engine, "load", no_load)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert option.lstrip("-").replace("-", "_") in err.replace("-", "_"), err
    return err


@pytest.mark.parametrize("option,value", SAY_BAD)
def test_say_refuses_a_bad_number_before_the_model_loads(monkeypatch, capsys, tmp_path, option, value):
    out = tmp_path / "out.wav"
    _fails_before_the_model_loads(monkeypatch, capsys, ["say", "--model", "demo", "--text", "Hello there.",
                                                        "-o", str(out), option, value], option)
    assert not out.exists()


@pytest.mark.parametrize("option,value", [("--temperature", "nan"), ("--top-k", "99999999999")])
def test_say_as_a_user_runs_it(tmp_path, option, value):
    out = tmp_path / "out.wav"
    cache = tmp_path / "cache"
    result = kazeia("say", "--model", "demo", "--text", "Hello.", "-o", out, option, value,
                    env={"KAZEIA_CACHE_DIR": str(cache)}, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"kazeia say: error: {option} ") and len(result.stderr.splitlines()) == 1
    assert not out.exists() and not cache.exists()   # (the demo model was not even made)


@pytest.mark.parametrize("option,value", [("--max-frames", "0"), ("--seed", "-1"), ("--pause-title", "nan"),
                                          ("--pause-sentence", "inf"), ("--batch", "0"), ("--max-chars", "2"),
                                          ("--loudness", "nan")])
def test_book_refuses_a_bad_number_before_the_model_loads(monkeypatch, capsys, tmp_path, option, value):
    from support.books import make_epub
    book = make_epub(tmp_path / "book.epub")
    out = tmp_path / "out"
    _fails_before_the_model_loads(monkeypatch, capsys, ["book", str(book), "--model", "demo", "-o", str(out),
                                                        option, value], "loudness" if option == "--loudness" else option)
    assert not out.exists()


def test_pauses_in_a_row_are_refused_when_planned_not_after_the_work(tmp_path):
    out = tmp_path / "out.wav"
    result = kazeia("say", "--model", "demo", "--speaker", "ryan", "--text", "One." + "[pause:60s]" * 11 + " Two.",
                    "-o", out, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert re.search(r"error: line 1, column \d+: pauses in a row add up to 660 s, over the limit of 600 s", result.stderr)
    assert not out.exists() and not list(tmp_path.glob(".*kazeia-chunks"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(1, 60), st.sampled_from(["word.", "\n\n"])), min_size=1, max_size=60))
def test_a_planned_text_never_holds_a_pause_join_refuses(parts):
    from kazeia.engine.text.compose import Cast, compose
    from kazeia.engine.text.limits import MAX_PAUSE_RUN_MS
    from kazeia.engine.text.markup import MarkupError
    text = "Start. " + " ".join(f"[pause:{p}s]" if isinstance(p, int) else p for p in parts) + " End."
    try:
        plan = compose(text, default=Cast(speaker="ryan"))
    except MarkupError as e:
        assert "pauses" in str(e) and str(e).startswith("line ")
        return
    assert all(p <= MAX_PAUSE_RUN_MS for p in plan.pieces if isinstance(p, float))


def test_the_markups_pauses_are_bounded_in_all():
    from kazeia.engine.text.compose import Cast, compose
    from kazeia.engine.text.markup import MarkupError
    with pytest.raises(MarkupError, match=r"line 361, column 6: the text's pauses add up to over 6 h"):
        compose("word [pause:60s]\n" * 400, default=Cast(speaker="ryan"))


def test_script_output_names_are_capped_in_bytes(tmp_path):
    from kazeia.engine.script.lines import MAX_OUTPUT_NAME_BYTES, output_names, read_script
    script = tmp_path / "s.csv"
    script.write_text("id,text\n" + "語" * 100 + ",Hello.\nshort,Hi.\n")
    lines, problems = read_script(script)
    assert problems == []
    _, problems = output_names(lines, "{id}")
    assert [(n, f"over the limit of {MAX_OUTPUT_NAME_BYTES}" in why) for n, _, why in problems] == [(2, True)]


def test_the_native_sampler_refuses_nan_itself():
    """The same guard in C++ (register_tts.cpp): no caller reaches the sampler with NaN (the sampler
    itself, sampler.cpp, returns the first largest logit rather than -1 when it keeps no token)."""
    from kazeia.engine import _native
    for bad in (float("nan"), float("inf"), 0.0):
        with pytest.raises(ValueError, match="temperature"):
            _native.SamplingConfig(do_sample=True, temperature=bad, top_k=50, top_p=1.0)
