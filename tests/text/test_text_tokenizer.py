"""Text tokenizer stored in the GGUF vs the reference's ids (tests/golden/tokenizer_cases.json)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kazeia.engine import open_model

from support.goldens import GOLDEN, VARIANTS

CASES = json.loads((GOLDEN / "tokenizer_cases.json").read_text())


@pytest.mark.parity
@pytest.mark.parametrize("variant", VARIANTS)
def test_ids_match_reference_qwen2_split(converted, variant):
    tok = open_model(converted(variant)).text_tokenizer()
    entry = CASES["variants"][f"tiny-{variant}"]
    assert entry["tokenizers"]["qwen2_fast"]["split_regex_kind"] == "qwen2"
    names = [t["name"] for t in entry["texts"]]
    # the hard cases the issue names are in the set
    assert {"camel_case", "digits", "cjk", "emoji", "combining_marks"} <= set(names)
    for case in entry["texts"]:
        assert tok.encode(case["text"]) == case["ids"]["qwen2_fast"], case["name"]
        assert tok.encode(case["text"]) == case["ids"]["qwen2_slow"], case["name"]
        # the reference wrapper's own processor (Qwen2 regex on these folders, see the summary)
        if entry["tokenizers"]["wrapper"]["split_regex_kind"] == "qwen2":
            assert tok.encode(case["text"]) == case["ids"]["wrapper"], case["name"]
        assert tok.decode(case["ids"]["qwen2_fast"]) == case["decoded"], case["name"]


@pytest.mark.parity
def test_mistral_split_reproduces_the_patched_reference(converted):
    tok = open_model(converted("custom_voice")).text_tokenizer(split="mistral")
    entry = CASES["variants"]["tiny-custom_voice"]
    differing = 0
    for case in entry["texts"]:
        assert tok.encode(case["text"]) == case["ids"]["mistral_patched"], case["name"]
        differing += case["ids"]["mistral_patched"] != case["ids"]["qwen2_fast"]
    assert differing >= 1   # CamelCase splits differently: the switch is real


@pytest.mark.parametrize("case", sorted(CASES["case_prompts"]))
def test_prompt_ids_match_the_generation_cases(converted, case):
    """The ids the reference fed its model in each golden generation case."""
    prompt = CASES["case_prompts"][case]
    variant = {"cv": "custom_voice", "vd": "voice_design", "base": "base"}[case.split("_")[0]]
    tok = open_model(converted(variant)).text_tokenizer()
    data = np.load(GOLDEN / f"{case}.npz")
    assert tok.encode(prompt["input_text"]) == prompt["input_ids"] == data["input_ids"].tolist()
    for key in ("instruct", "ref"):
        if prompt[f"{key}_text"] is not None:
            assert tok.encode(prompt[f"{key}_text"]) == prompt[f"{key}_ids"] == data[f"{key}_ids"].tolist()


def test_unknown_split_is_rejected(converted):
    with pytest.raises(ValueError, match="qwen2, mistral"):
        open_model(converted("custom_voice")).text_tokenizer(split="gpt4")
