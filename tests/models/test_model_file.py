"""Model files: info matches the checkpoint's config; bad files raise ModelLoadError, never crash."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import gguf
import numpy as np
import pytest

from kazeia.engine import ModelLoadError, open_model

from support.goldens import VARIANTS, checkpoint_dir


@pytest.mark.parametrize("variant", VARIANTS)
def test_info_matches_config(converted, variant):
    cfg = json.loads((checkpoint_dir(variant) / "config.json").read_text())
    gen = json.loads((checkpoint_dir(variant) / "generation_config.json").read_text())
    st = json.loads((checkpoint_dir(variant) / "speech_tokenizer" / "config.json").read_text())
    model = open_model(converted(variant))
    info = model.info
    talker = cfg["talker_config"]
    assert info.variant == cfg["tts_model_type"] == variant
    assert info.size == cfg["tts_model_size"]
    assert not info.random_weights
    hp = info.hparams
    assert hp["talker"]["hidden_size"] == talker["hidden_size"]
    assert hp["talker"]["num_layers"] == talker["num_hidden_layers"]
    assert hp["talker"]["num_kv_heads"] == talker["num_key_value_heads"]
    assert hp["talker"]["text_vocab_size"] == talker["text_vocab_size"]
    assert hp["code_predictor"]["hidden_size"] == talker["code_predictor_config"]["hidden_size"]
    assert hp["code_predictor"]["has_input_proj"] == (talker["hidden_size"] != talker["code_predictor_config"]["hidden_size"])
    assert hp["decoder"]["upsample_rates"] == st["decoder_config"]["upsample_rates"]
    assert hp["decoder"]["samples_per_frame"] == 1920
    assert info.sample_rate == 24000 and info.frame_rate == 12.5
    speakers = {s.name: (s.codec_id, s.dialect) for s in info.speakers}
    want = {k.lower(): ((v[0] if isinstance(v, list) else v), talker["spk_is_dialect"].get(k) or None)
            for k, v in talker["spk_id"].items()}
    assert speakers == want
    langs = talker["codec_language_id"]
    assert set(info.languages) == {k for k in langs if "dialect" not in k}
    assert set(info.dialects) == {k for k in langs if "dialect" in k}
    assert info.language_ids == langs
    ids = model.special_text_ids()
    assert ids == {"im_start": cfg["im_start_token_id"], "im_end": cfg["im_end_token_id"],
                   "tts_pad": cfg["tts_pad_token_id"], "tts_bos": cfg["tts_bos_token_id"],
                   "tts_eos": cfg["tts_eos_token_id"]}
    assert model.codec_ids()["eos"] == talker["codec_eos_token_id"]
    assert model.codec_ids()["think_bos"] == talker["codec_think_bos_id"]
    for key in ("temperature", "top_k", "top_p", "repetition_penalty", "max_new_tokens", "do_sample"):
        assert info.sampling_defaults[key] == pytest.approx(gen[key]), key
    assert info.sampling_defaults["subtalker_top_k"] == gen["subtalker_top_k"]
    assert ("speaker_encoder" in info.stages) == (variant == "base")
    assert ("audio_encoder" in info.stages) == (variant == "base")


# One subprocess probes many damaged files, so a crash (abort, segfault) fails the test
# instead of killing pytest; every probe must end in ModelLoadError.
PROBE = textwrap.dedent("""
    import sys
    from kazeia.engine import ModelLoadError, open_model
    bad = []
    for path in sys.argv[1:]:
        try:
            open_model(path)
            bad.append(path + ": loaded")
        except ModelLoadError as e:
            assert str(e), path
    print("\\n".join(bad) or "ALL-REJECTED")
""")


def probe(tmp_path, blobs, batch: int = 16) -> list[str]:
    """Writes the damaged files a batch at a time (a few hundred MB at most on disk) and probes
    each batch; returns the files that loaded."""
    loaded, paths = [], []

    def run_batch():
        r = subprocess.run([sys.executable, "-c", PROBE, *map(str, paths)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"loader crashed (rc {r.returncode}): {r.stderr[-2000:]}"
        loaded.extend(line for line in r.stdout.strip().splitlines() if line != "ALL-REJECTED")
        for p in paths:
            p.unlink()
        paths.clear()

    for i, blob in enumerate(blobs):
        paths.append(tmp_path / f"damaged{i}.gguf")
        paths[-1].write_bytes(blob)
        if len(paths) == batch:
            run_batch()
    if paths:
        run_batch()
    return loaded


def test_truncated_files_are_rejected(converted, tmp_path):
    blob = converted("base").read_bytes()
    cuts = sorted({0, 1, 3, 4, 8, 16, 24, 100, 1000, 5000, 20000} | {int(x) for x in np.linspace(0, len(blob) - 1, 40)})
    assert probe(tmp_path, (blob[:cut] for cut in cuts)) == []


def test_corrupt_headers_are_rejected_or_loaded_cleanly(converted, tmp_path):
    """Random byte damage in the header and metadata: either a clean error or (if the damage hits
    a harmless byte) a normal load - never a crash or hang."""
    blob = converted("custom_voice").read_bytes()
    rng = np.random.default_rng(7)

    def damaged():
        for _ in range(150):
            copy = bytearray(blob)
            for pos in rng.integers(4, min(len(blob), 60_000), size=int(rng.integers(1, 4))):
                copy[pos] = int(rng.integers(0, 256))
            yield bytes(copy)
    probe(tmp_path, damaged())


def test_wrong_files_get_clear_messages(tmp_path, converted):
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        open_model(text)
    with pytest.raises(ModelLoadError, match="file not found"):
        open_model(tmp_path / "missing.gguf")
    with pytest.raises(ModelLoadError, match="not a regular file"):
        open_model(tmp_path)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        open_model(empty)

    foreign = tmp_path / "llama.gguf"
    w = gguf.GGUFWriter(foreign, "llama")
    w.add_tensor("tok_embd.weight", np.zeros((4, 8), np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    with pytest.raises(ModelLoadError, match="architecture 'llama'"):
        open_model(foreign)


def rewrite_gguf(src, dst, *, drop_keys=(), set_values=None, drop_tensors=(), rename=None):
    """Copy a GGUF file with edits, through gguf-py (independent of our writer)."""
    reader = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, reader.fields["general.architecture"].contents())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture" or name in drop_keys:
            continue
        value = (set_values or {}).get(name, field.contents())
        sub = field.types[1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, value, field.types[0], sub_type=sub)
    for t in reader.tensors:
        if t.name in drop_tensors:
            continue
        name = (rename or {}).get(t.name, t.name)
        w.add_tensor(name, np.asarray(t.data), raw_shape=list(reversed([int(x) for x in t.shape])),
                     raw_dtype=t.tensor_type)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()


def test_semantic_problems_name_what_is_wrong(converted, tmp_path):
    src = converted("custom_voice")
    cases = [
        (dict(set_values={"qwen3tts.format_version": 99}), "format version 99"),
        (dict(drop_keys=("qwen3tts.format_version",)), "format_version"),
        (dict(drop_keys=("qwen3tts.talker.num_layers",)), "missing metadata key qwen3tts.talker.num_layers"),
        (dict(set_values={"qwen3tts.variant": "karaoke"}), "karaoke"),
        (dict(drop_tensors=("talker.blk.1.ffn_up.weight",)), "missing tensor talker.blk.1.ffn_up.weight"),
        (dict(rename={"cp.head.3.weight": "cp.head.99.weight"}), "unexpected tensor cp.head.99.weight"),
        (dict(set_values={"qwen3tts.talker.hidden_size": 96}), "shape"),
    ]
    for i, (edit, message) in enumerate(cases):
        dst = tmp_path / f"edit{i}.gguf"
        rewrite_gguf(src, dst, **edit)
        with pytest.raises(ModelLoadError, match=message.replace(".", r"\.")):
            open_model(dst)
    # the unedited copy still loads: the edits, not the copying, caused the errors
    rewrite_gguf(src, tmp_path / "same.gguf")
    assert open_model(tmp_path / "same.gguf").info.variant == "custom_voice"


def test_damaged_metadata_is_a_model_load_error(converted, tmp_path):
    """A damaged tokenizer JSON or a metadata value of the wrong kind names the file and the key when
    the engine loads it (not a bare exception from the tokenizer library)."""
    from kazeia.engine import Engine
    src = converted("custom_voice")
    key = "tokenizer.huggingface.json"
    text = gguf.GGUFReader(src).fields[key].contents()
    for i, damaged in enumerate([text[:929], text.replace('"model"', '"modle"', 1)]):
        dst = tmp_path / f"tok{i}.gguf"
        rewrite_gguf(src, dst, set_values={key: damaged})
        with pytest.raises(ModelLoadError, match=rf"tok{i}\.gguf: metadata key {key} is not a valid tokenizer"):
            Engine.load(dst, threads=1)
    r = subprocess.run([sys.executable, "-m", "kazeia.engine", "say", "--model", str(tmp_path / "tok0.gguf"),
                        "--speaker", "vivian", "--text", "hi", "-o", str(tmp_path / "x.wav")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "not a valid tokenizer" in r.stderr and "Traceback" not in r.stderr
