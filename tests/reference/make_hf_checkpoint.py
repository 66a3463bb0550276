#!/usr/bin/env python3
"""Write a FULL-SIZE random-weight Qwen3-TTS-12Hz checkpoint in the released Hugging Face layout,
so that Kazeia (through its converter) and peer engines (vox-tts) run the very same weights.

    .venv-ref/bin/python tests/reference/make_hf_checkpoint.py OUT_DIR [--size 0.6b|1.7b]
        [--variant custom_voice|base|voice_design] [--seed 1234] [--threads 1]

OUT_DIR/
  config.json  generation_config.json  model.safetensors (bf16)
  vocab.json  merges.txt  tokenizer_config.json          (byte-level BPE, Qwen2 split regex;
                                                            specials at their released ids)
  speech_tokenizer/{config.json, model.safetensors, preprocessor_config.json}  (Mimi enc + dec)

Configs, weight init and bf16 saving are the golden harness's (build_goldens.py beside this file).
Deterministic: the same seed gives byte-identical files. Random weights: the audio is noise.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import json
import shutil
import sys
import tempfile
import time

sys.dont_write_bytecode = True          # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_goldens as bg  # noqa: E402  (installs the sox/onnxruntime/torchaudio stubs, imports qwen_tts)

import torch  # noqa: E402

SIZE_TAGS = {"0.6b": "0b6", "1.7b": "1b7"}
REAL_FIRST_SPECIAL = 151643          # <|endoftext|> in the released Qwen2 vocabulary
TEXT_VOCAB = 151936                  # talker text_vocab_size of the released models
TTS_SPECIALS = ["<tts_pad>", "<tts_text_bos>", "<tts_text_eod>", "<tts_text_bos_single>"]  # 151671..151674


def log(msg: str, t0: float) -> None:
    print(f"[{time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def write_text_tokenizer(out_dir: str) -> dict:
    """Small BPE (bg.build_text_tokenizer: 256 byte symbols + merges incl. 'assistant', 'user'), then
    padded with <unused_N> to 151643 entries so that <|endoftext|>/<|im_start|>/<|im_end|> and the
    tts_* tokens sit at the released ids (151643.., 151671..151674) with the real text_vocab_size."""
    with tempfile.TemporaryDirectory() as tmp:
        info = bg.build_text_tokenizer(tmp)
        vocab = json.load(open(os.path.join(tmp, "vocab.json"), encoding="utf-8"))
        shutil.copyfile(os.path.join(tmp, "merges.txt"), os.path.join(out_dir, "merges.txt"))
        tcfg = json.load(open(os.path.join(tmp, "tokenizer_config.json"), encoding="utf-8"))
    n = len(vocab)
    for i in range(n, REAL_FIRST_SPECIAL):
        vocab[f"<unused_{i}>"] = i
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(vocab, f, ensure_ascii=False, separators=(",", ":"))
    names = (["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
             + [f"<|reserved_{i}|>" for i in range(REAL_FIRST_SPECIAL + 3, bg.REAL_TEXT_SPECIAL_IDS["tts_pad_token_id"])]
             + TTS_SPECIALS)
    ids = {s: REAL_FIRST_SPECIAL + i for i, s in enumerate(names)}
    tcfg["added_tokens_decoder"] = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                             "single_word": False, "special": True} for s, i in ids.items()}
    bg.write_json(os.path.join(out_dir, "tokenizer_config.json"), tcfg)
    special = {"im_start_token_id": ids["<|im_start|>"], "im_end_token_id": ids["<|im_end|>"],
               "tts_pad_token_id": ids["<tts_pad>"], "tts_bos_token_id": ids["<tts_text_bos>"],
               "tts_eos_token_id": ids["<tts_text_eod>"]}
    assert special == bg.REAL_TEXT_SPECIAL_IDS, special
    check_tokenizer(out_dir, ids, info["assistant_id"])
    return {"assistant_id": info["assistant_id"], "bpe_vocab_size": n, "special": special}


def check_tokenizer(d: str, ids: dict, assistant_id: int) -> None:
    """Same split as the released Qwen2 tokenizer: the role prefix must be exactly 3 tokens."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, AddedToken
    tok = Tokenizer(models.BPE.from_file(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(bg.QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in sorted(ids, key=ids.get)])
    got = tok.encode("<|im_start|>assistant\n", add_special_tokens=False).ids
    assert got == [ids["<|im_start|>"], assistant_id, tok.token_to_id("Ċ")], got
    for s, i in ids.items():
        assert tok.token_to_id(s) == i, (s, i, tok.token_to_id(s))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--size", default="0.6b", choices=sorted(SIZE_TAGS))
    ap.add_argument("--variant", default="custom_voice", choices=["custom_voice", "base", "voice_design"])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    a = ap.parse_args(argv)
    if a.variant == "voice_design" and a.size == "0.6b":
        ap.error("there is no 0.6B VoiceDesign release")
    t0 = time.perf_counter()
    torch.set_num_threads(max(1, min(2, a.threads)))
    if os.path.exists(a.out):
        if not a.force:
            sys.exit(f"{a.out} exists (use --force)")
        shutil.rmtree(a.out)
    tmp_out = a.out.rstrip("/") + ".partial"
    shutil.rmtree(tmp_out, ignore_errors=True)
    os.makedirs(os.path.join(tmp_out, "speech_tokenizer"))

    tok = write_text_tokenizer(tmp_out)
    log(f"text tokenizer: {tok['bpe_vocab_size']} BPE tokens, padded to {REAL_FIRST_SPECIAL}, specials {tok['special']}", t0)

    tag = SIZE_TAGS[a.size]
    cfg = bg.model_config(bg.REAL_TALKER[tag], model_type=a.variant, size_tag=tag, text_vocab_size=TEXT_VOCAB,
                          text_special_ids=bg.REAL_TEXT_SPECIAL_IDS, assistant_token_id=tok["assistant_id"])
    from transformers.modeling_utils import no_init_weights
    with no_init_weights():                       # fill_random_ overwrites every tensor anyway
        model = bg.instantiate_tts_model(cfg).eval()
    log(f"instantiated {a.size} {a.variant}: {sum(p.numel() for p in model.state_dict().values()) / 1e6:.1f} M params", t0)
    bg.fill_random_(model, a.seed)
    log("random weights filled (std 1/sqrt(fan_in), bf16-rounded)", t0)
    bg.save_bf16_weights(model, tmp_out)
    del model
    bg.write_json(os.path.join(tmp_out, "config.json"), cfg)
    bg.write_json(os.path.join(tmp_out, "generation_config.json"), bg.RELEASED_GENERATION_CONFIG)
    log("model.safetensors written", t0)

    st_cfg = bg.speech_tokenizer_config(tiny=False)
    with no_init_weights():
        st = bg.instantiate_speech_tokenizer(st_cfg).eval()
    # the same damping as the golden tiny checkpoints: keeps the random vocoder mostly inside [-1, 1]
    bg.fill_random_(st, a.seed + 1, overrides={"conv2.conv.weight": 0.3, "decoder.decoder.6.conv.weight": 0.25})
    st_dir = os.path.join(tmp_out, "speech_tokenizer")
    bg.save_bf16_weights(st, st_dir)
    del st
    bg.write_json(os.path.join(st_dir, "config.json"), st_cfg)
    bg.write_json(os.path.join(st_dir, "preprocessor_config.json"), bg.SPEECH_PREPROCESSOR_CONFIG)
    log("speech_tokenizer/ written", t0)
    os.rename(tmp_out, a.out)
    sizes = {os.path.relpath(os.path.join(r, f), a.out): os.path.getsize(os.path.join(r, f))
             for r, _, fs in os.walk(a.out) for f in fs}
    print(json.dumps({"out": a.out, "size": a.size, "variant": a.variant, "seed": a.seed,
                      "seconds": round(time.perf_counter() - t0, 1),
                      "files_mb": {k: round(v / 2**20, 1) for k, v in sorted(sizes.items())}}))


if __name__ == "__main__":
    main()
