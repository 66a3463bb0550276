"""Converter: tensors bit-exact with the checkpoint (f32), every source tensor accounted for,
clear errors naming the tensor at fault, storage types per role."""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from safetensors.numpy import save_file

from kazeia import _native
from kazeia.engine import ConversionError, convert, open_model
from kazeia.engine.model_files.metadata import P, metadata_from_configs

from support.goldens import GOLDEN, VARIANTS, checkpoint_dir
from support.safetensors_raw import checkpoint_tensors, read_all


def expected_value(src: dict[str, np.ndarray], spec: dict) -> np.ndarray:
    if spec["transform"] == "codebook":
        total, usage = (src[s] for s in spec["sources"])
        return total / np.maximum(usage, np.float32(1e-5))[:, None]
    return src[spec["sources"][0]]


@pytest.mark.parametrize("variant", VARIANTS)
def test_f32_conversion_is_bit_exact(converted, variant):
    model = open_model(converted(variant, "f32"))
    src = checkpoint_tensors(checkpoint_dir(variant))
    specs = model.native.tensor_specs()
    assert len(specs) > 250
    for spec in specs:
        want = expected_value(src, spec)
        got = model.native.tensor_f32(spec["name"])
        assert model.native.tensor_type(spec["name"]) == "f32", spec["name"]
        assert got.shape == want.shape, spec["name"]
        assert np.array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32)), spec["name"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_source_tensor_is_consumed_or_deliberately_ignored(converted, variant):
    model = open_model(converted(variant, "f32"))
    names = set(checkpoint_tensors(checkpoint_dir(variant)))
    consumed = set(model.source_tensors())
    ignored = set(model.native.get_string_array(P + "source.ignored"))
    assert consumed.isdisjoint(ignored)
    assert consumed | ignored == names
    # only the unused parts are dropped: the decoder's encode-side projections, training flags,
    # codebooks beyond the 16 valid ones, and (outside Base) the audio encoder
    for name in ignored:
        assert (name.startswith("encoder.") or re.search(r"rvq_(first|rest)\.input_proj", name)), name
    if variant == "base":
        assert any(n.startswith("encoder.encoder.") for n in consumed)
        assert any(n.startswith("speaker_encoder.") for n in consumed)
    else:
        assert not any(n.startswith(("encoder.", "speaker_encoder.")) for n in consumed)


def real_layout_cases():
    inventory = json.loads((GOLDEN / "inventory_real.json").read_text())
    return inventory


@pytest.mark.parametrize("model_key", ["0.6b-base", "0.6b-custom_voice", "1.7b-base", "1.7b-custom_voice"])
def test_real_layout_checkpoints_are_fully_covered(model_key):
    """The table expanded for the released configs names every tensor of the real checkpoints (as the
    reference builds them), with the real shapes; nothing is left over except deliberate drops."""
    inv = real_layout_cases()
    entry = inv["models"][model_key]
    md = metadata_from_configs(entry["config"], {}, inv["speech_tokenizer"]["config"])
    specs = _native.expected_tensors(md)
    real = {**entry["tensors"], **inv["speech_tokenizer"]["tensors"]}
    real_shapes = {name: list(v["shape"]) for name, v in real.items()}
    covered = set()
    for spec in specs:
        for i, source in enumerate(spec["sources"]):
            assert source in real_shapes, f"{spec['name']} reads {source}, which the real checkpoint lacks"
            want = spec["shape"] if i == 0 else spec["shape"][:1]
            assert real_shapes[source] == want, source
            covered.add(source)
    patterns = [re.compile(p) for p, _ in _native.ignored_sources(md)]
    leftover = [n for n in real_shapes if n not in covered and not any(p.search(n) for p in patterns)]
    assert leftover == []
    n_params = sum(int(np.prod(s["shape"])) for s in specs)
    assert n_params > (0.8e9 if model_key.startswith("0.6b") else 1.8e9)


def copy_checkpoint(tmp_path, variant="custom_voice"):
    dst = tmp_path / f"ckpt-{variant}"
    shutil.copytree(checkpoint_dir(variant), dst)
    return dst


def rewrite_weights(folder, edit):
    tensors = read_all(folder / "model.safetensors")
    edit(tensors)
    save_file(tensors, str(folder / "model.safetensors"))


def test_missing_tensor_is_named(tmp_path):
    ckpt = copy_checkpoint(tmp_path)
    rewrite_weights(ckpt, lambda t: t.pop("talker.model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(ConversionError, match=r"missing tensor talker\.model\.layers\.1\.mlp\.up_proj\.weight"):
        convert(ckpt, tmp_path / "out.gguf", progress=False)
    assert not list(tmp_path.glob("out.gguf*"))


def test_unknown_tensor_is_named(tmp_path):
    ckpt = copy_checkpoint(tmp_path)
    rewrite_weights(ckpt, lambda t: t.update({"talker.model.layers.0.extra.weight": np.zeros((2, 2), np.float32)}))
    with pytest.raises(ConversionError, match=r"unexpected tensor talker\.model\.layers\.0\.extra\.weight"):
        convert(ckpt, tmp_path / "out.gguf", progress=False)


def test_misshaped_tensor_is_named_with_both_shapes(tmp_path):
    ckpt = copy_checkpoint(tmp_path)

    def edit(t):
        t["talker.codec_head.weight"] = t["talker.codec_head.weight"][:100]
    rewrite_weights(ckpt, edit)
    with pytest.raises(ConversionError, match=r"talker\.codec_head\.weight has shape \[100, 64\], expected \[3072, 64\]"):
        convert(ckpt, tmp_path / "out.gguf", progress=False)


def test_failed_conversion_keeps_an_existing_output_file(tmp_path):
    ckpt = copy_checkpoint(tmp_path)
    rewrite_weights(ckpt, lambda t: t.pop("talker.model.norm.weight"))
    out = tmp_path / "keep.gguf"
    out.write_bytes(b"user data")
    with pytest.raises(ConversionError):
        convert(ckpt, out, progress=False)
    assert out.read_bytes() == b"user data"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["keep.gguf"]


def test_missing_files_are_reported(tmp_path):
    with pytest.raises(ConversionError, match="not a folder"):
        convert(tmp_path / "nope", tmp_path / "o.gguf")
    ckpt = copy_checkpoint(tmp_path)
    (ckpt / "merges.txt").unlink()
    with pytest.raises(ConversionError, match="merges.txt"):
        convert(ckpt, tmp_path / "o.gguf")
    ckpt2 = copy_checkpoint(tmp_path, "base")
    (ckpt2 / "speech_tokenizer" / "model.safetensors").write_bytes(b"\x10\x00")
    with pytest.raises(ConversionError, match="not a safetensors file"):
        convert(ckpt2, tmp_path / "o.gguf")


def test_sharded_checkpoint_converts_identically(tmp_path, converted):
    ckpt = copy_checkpoint(tmp_path)
    tensors = read_all(ckpt / "model.safetensors")
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for shard, part in shards.items():
        # f32 in the shards: the values are the checkpoint's (bf16-exact), so the output must not change
        save_file({n: tensors[n] for n in part}, str(ckpt / shard))
        weight_map.update({n: shard for n in part})
    (ckpt / "model.safetensors").unlink()
    (ckpt / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    out = tmp_path / "sharded.gguf"
    convert(ckpt, out, out_type="f32", progress=False)
    a, b = open_model(out), open_model(converted("custom_voice", "f32"))
    for spec in a.native.tensor_specs():
        assert np.array_equal(a.native.tensor_f32(spec["name"]), b.native.tensor_f32(spec["name"])), spec["name"]


@pytest.mark.parametrize("out_type", ["f16", "bf16", "q8_0", "q6_k", "q5_k", "q4_k"])
def test_storage_types_follow_roles(converted, out_type):
    model = open_model(converted("base", out_type))
    ref = open_model(converted("base", "f32"))
    seen = set()
    for spec in model.native.tensor_specs():
        name, storage = spec["name"], spec["storage"]
        t = model.native.tensor_type(name)
        seen.add(t)
        if storage == "f32":
            assert t == "f32", name
        elif storage == "half_or_f32":
            assert t == "f16", name
        else:
            # a quantised type falls back when rows are not whole blocks (q4_K: 256, q8_0: 32)
            chain = {k: [(k.replace("_k", "_K"), 256), ("q8_0", 32), ("f16", 1)] for k in ("q6_k", "q5_k", "q4_k")}
            chain["q8_0"] = [("q8_0", 32), ("f16", 1)]
            want_t = next(t for t, block in chain.get(out_type, [(out_type, 1)]) if spec["shape"][-1] % block == 0)
            assert t == want_t, (name, t)
        got, want = model.native.tensor_f32(name), ref.native.tensor_f32(name)
        scale = float(np.abs(want).max()) or 1.0
        tol = {"f32": 0, "f16": 2e-3, "bf16": 8e-3, "q8_0": 1e-2, "q6_K": 0.03, "q5_K": 0.07, "q4_K": 0.15}[t]
        assert float(np.abs(got - want).max()) <= tol * scale, name
    assert {"f16": "f16", "bf16": "bf16", "q8_0": "q8_0"}.get(out_type, "q8_0") in seen


def test_metadata_matches_released_configs():
    cfg = json.loads((checkpoint_dir("custom_voice") / "config.json").read_text())
    gen = json.loads((checkpoint_dir("custom_voice") / "generation_config.json").read_text())
    st = json.loads((checkpoint_dir("custom_voice") / "speech_tokenizer" / "config.json").read_text())
    md = metadata_from_configs(cfg, gen, st)
    assert md[P + "talker.num_layers"] == cfg["talker_config"]["num_hidden_layers"]
    assert md[P + "sampling.top_k"] == gen["top_k"]
    with pytest.raises(ConversionError, match="tts_model_type"):
        metadata_from_configs({**cfg, "tts_model_type": "singing"}, gen, st)
    broken = json.loads(json.dumps(cfg))
    del broken["talker_config"]["hidden_size"]
    with pytest.raises(ConversionError, match="hidden_size"):
        metadata_from_configs(broken, gen, st)


def test_type_mix_parses_per_stage_types_and_names_mistakes():
    from kazeia.engine.model_files.gguf_file import TypeMix
    mix = TypeMix.parse("talker=q5_k, cp=q6_k")
    assert (mix.for_tensor("talker.blk.0.attn_q.weight"), mix.for_tensor("cp.blk.0.attn_q.weight"),
            mix.for_tensor("dec.pre_conv.weight")) == ("q5_k", "q6_k", "f16")
    assert str(mix) == "talker=q5_k,code_predictor=q6_k" and mix.slug == "talker-q5_k+cp-q6_k"
    assert str(TypeMix.parse("q8_0,talker=q6_k")) == "talker=q6_k,code_predictor=q8_0"
    assert str(TypeMix.parse("talker=q6_k,code_predictor=q6_k", fallback="q6_k")) == "q6_k"
    for bad, why in [("q3_k", "unknown type 'q3_k'"), ("decoder=q8_0", "unknown stage 'decoder'"),
                     ("talker=q8_0,talker=q6_k", "names the talker twice"), ("q8_0,q6_k", "two types")]:
        with pytest.raises(ValueError, match=why):
            TypeMix.parse(bad)


def test_per_stage_mix_stores_each_stage_in_its_type(converted, tmp_path):
    out = tmp_path / "mix.gguf"
    # (the tiny checkpoint's rows are not whole q6_K blocks: f16 and q8_0 keep the stages apart)
    convert(checkpoint_dir("base"), out, out_type="talker=f16,code_predictor=q8_0", progress=False)
    model = open_model(out)
    assert model.info.file_type == "talker=f16,code_predictor=q8_0"
    assert model.info.stage_type("talker") == "f16" and model.info.stage_type("code_predictor") == "q8_0"
    assert model.info.stage_type("decoder") == "f16"
    whole = {"talker.": open_model(converted("base", "f16")), "cp.": open_model(converted("base", "q8_0"))}
    for spec in model.native.tensor_specs():   # each stage exactly as a whole-file conversion to its type
        for prefix, same in whole.items():
            if spec["name"].startswith(prefix):
                assert model.native.tensor_type(spec["name"]) == same.native.tensor_type(spec["name"]), spec["name"]
                assert np.array_equal(model.native.tensor_f32(spec["name"]), same.native.tensor_f32(spec["name"]))
