"""Random models: deterministic, real layout, clearly labelled."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kazeia import _native
from kazeia.engine import demo_model_path, make_random_model, open_model
from kazeia.engine.model_files.metadata import metadata_from_configs
from kazeia.engine.model_files.random_model import GENERATION_CONFIG, model_config, speech_tokenizer_config, demo_tokenizer

from support.goldens import GOLDEN


@pytest.mark.parametrize("variant", ["custom_voice", "voice_design", "base"])
def test_tiny_random_model_is_deterministic_and_labelled(tmp_path, variant):
    a = make_random_model(tmp_path / "a.gguf", variant=variant, seed=3, progress=False)
    b = make_random_model(tmp_path / "b.gguf", variant=variant, seed=3, progress=False)
    c = make_random_model(tmp_path / "c.gguf", variant=variant, seed=4, progress=False)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    model = open_model(a)
    assert model.info.random_weights
    assert "random weights, produces noise" in model.info.description
    assert "RANDOM WEIGHTS" in model.info.summary()
    assert model.info.variant == variant
    assert a.stat().st_size < 8 * 2**20
    tok = model.text_tokenizer()
    ids = model.special_text_ids()
    assert tok.encode("<|im_start|>assistant\n")[0] == ids["im_start"]
    assert len(tok.encode("<|im_start|>assistant\n")) == 3


@pytest.mark.parametrize("size,variant", [("0.6b", "base"), ("0.6b", "custom_voice"), ("1.7b", "base"),
                                          ("1.7b", "custom_voice")])
def test_full_size_random_layout_matches_released_shapes(size, variant):
    """The configs make-random-model writes expand to exactly the tensors and shapes of the real
    checkpoints (as the reference builds them at full size)."""
    inv = json.loads((GOLDEN / "inventory_real.json").read_text())
    real = {**inv["models"][f"{size}-{variant}"]["tensors"], **inv["speech_tokenizer"]["tensors"]}
    _, ids, vocab = demo_tokenizer(151936)
    assert ids["<|im_start|>"] == 151644 and ids["<tts_pad>"] == 151671 and ids["<tts_text_eod>"] == 151673
    special = dict(im_start_token_id=151644, im_end_token_id=151645, tts_pad_token_id=151671,
                   tts_bos_token_id=151672, tts_eos_token_id=151673)
    md = metadata_from_configs(model_config(size, variant, vocab, special), GENERATION_CONFIG,
                               speech_tokenizer_config(size))
    specs = _native.expected_tensors(md)
    for spec in specs:
        for i, source in enumerate(spec["sources"]):
            want = spec["shape"] if i == 0 else spec["shape"][:1]
            assert list(real[source]["shape"]) == want, source
    real_cfg = inv["models"][f"{size}-{variant}"]["config"]["talker_config"]
    ours = model_config(size, variant, vocab, special)["talker_config"]
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "vocab_size", "text_vocab_size", "text_hidden_size"):
        assert ours[key] == real_cfg[key], key


def test_random_values_are_well_scaled(tmp_path):
    model = open_model(make_random_model(tmp_path / "r.gguf", out_type="f32", progress=False))
    norm = model.native.tensor_f32("talker.blk.0.attn_norm.weight")
    assert 0.5 < norm.mean() < 1.5
    w = model.native.tensor_f32("talker.blk.0.attn_q.weight")
    assert 0.05 < w.std() * np.sqrt(w.shape[1]) < 2


def test_demo_model_is_created_once(monkeypatch, tmp_path):
    monkeypatch.setenv("KAZEIA_CACHE_DIR", str(tmp_path))
    path = demo_model_path()
    stamp = path.stat().st_mtime_ns
    assert demo_model_path() == path and path.stat().st_mtime_ns == stamp
    info = open_model(path).info
    assert info.random_weights and info.variant == "custom_voice" and info.size == "tiny"


def test_random_checkpoint_converts_to_the_random_model_of_its_seed(tmp_path):
    """The Hugging Face folder the bench shares with peer engines is written without torch, with the
    tensors the converter reads and the values of the random model of the same seed (bf16-rounded),
    so converting it gives that model back; its tokenizer files say what the model's tokenizer says."""
    from kazeia.engine.model_files.convert import convert
    from kazeia.engine.model_files.random_checkpoint import make_random_checkpoint
    from support.safetensors_raw import checkpoint_tensors

    folder = make_random_checkpoint(tmp_path / "hf", size="tiny", seed=5)
    raw = checkpoint_tensors(folder)   # an independent reader
    assert raw and not any(n.startswith("encoder.") for n in raw)
    assert all(n.startswith("talker.") for n in
               json.loads((folder / "model.safetensors").read_bytes()[8:8 + int.from_bytes(
                   (folder / "model.safetensors").read_bytes()[:8], "little")]))
    converted = open_model(convert(folder, tmp_path / "c.gguf", out_type="f32", decoder_type="f32",
                                   progress=False).path)
    random = open_model(make_random_model(tmp_path / "r.gguf", seed=5, out_type="f32", decoder_type="f32",
                                          progress=False))
    md = metadata_from_configs(json.loads((folder / "config.json").read_text()), GENERATION_CONFIG,
                               json.loads((folder / "speech_tokenizer" / "config.json").read_text()))
    names = [s["name"] for s in _native.expected_tensors(md)]
    assert len(names) > 100
    for name in names:
        a, b = converted.native.tensor_f32(name), random.native.tensor_f32(name)
        assert a.shape == b.shape, name
        assert np.allclose(a, b, rtol=2 ** -8, atol=1e-30), name   # bf16 keeps 8 bits of mantissa
    text = "Hello there, assistant: 123 tokens!"
    assert converted.text_tokenizer().encode(text) == random.text_tokenizer().encode(text)
    assert converted.special_text_ids() == random.special_text_ids()
    # the same folder again is byte-identical (a cache is rebuilt only when missing)
    again = make_random_checkpoint(tmp_path / "hf2", size="tiny", seed=5)
    for f in ("model.safetensors", "speech_tokenizer/model.safetensors", "vocab.json", "config.json"):
        assert (again / f).read_bytes() == (folder / f).read_bytes(), f
