"""Writes a Qwen3-TTS checkpoint in the released Hugging Face layout as a bundle qwen3synth (PyPI) opens
with `Qwen3Runtime.load`: onnxvoice's `qwen3-wavekat-v1` layout (config.json, tokenizer/, embeddings/
*.npy, fp32/ or int4/ talker_prefill, talker_decode, code_predictor and vocoder graphs with their
.onnx.data beside them). No such bundle can be downloaded here, and the bench's random weights are no
release: the graphs are the reference's own modules (qwen-tts 0.1.1) and weights, exported by PyTorch,
in the graph contract onnxvoice checks (names, ranks, KV cache layouts).

    python qwen3synth_export.py HF_DIR OUT_DIR QUALITY      (QUALITY: fp32 or int4)

int4 is ONNX Runtime's own 4-bit weight quantizer (MatMulNBits, blocks of 32, int8 activations) on the
three LM graphs; the vocoder stays f32, as in the bundles the peer publishes. The bundle is written
beside OUT_DIR and renamed into place when whole. Prints one JSON line. Run by the ONNX Runtime venv
(peers/setup_ort.sh); imports nothing from Kazeia.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json
import shutil
import sys
import time
from pathlib import Path

from decoder_bench import load_decoder, stub_unused_modules  # same folder

GROUPS = 16


def load_model(folder: Path):
    """The reference's Qwen3TTSForConditionalGeneration holding the folder's talker weights (text
    projection, codec head, code predictor); the speech tokenizer is loaded apart (load_decoder)."""
    stub_unused_modules()
    import torch
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration
    from safetensors.torch import load_file

    cfg = Qwen3TTSConfig(**json.loads((folder / "config.json").read_text()))
    cfg._attn_implementation = "eager"
    with torch.device("meta"):   # (no random initialisation of 0.6-1.7B weights that are replaced)
        model = Qwen3TTSForConditionalGeneration(cfg)
    state = {k: v.float() for k, v in load_file(str(folder / "model.safetensors")).items()}
    model.load_state_dict(state, strict=False, assign=True)
    missing = [n for n, p in model.talker.named_parameters() if p.is_meta]
    if missing:
        raise SystemExit(f"the checkpoint lacks talker weights: {missing[:5]}")
    for name, buf in list(model.talker.named_buffers()):   # rotary tables: made again off the meta device
        if buf.is_meta:
            owner = model.talker.get_submodule(name.rsplit(".", 1)[0])
            inv_freq, _ = owner.rope_init_fn(owner.config, None)
            owner.inv_freq = owner.original_inv_freq = inv_freq
    return cfg, model.eval()


def attention_block(layer, hidden, cos, sin, past_k, past_v, mask, rotate):
    """One decoder layer of the reference, its KV cache explicit: (hidden, keys, values)."""
    import torch
    from qwen_tts.core.models.modeling_qwen3_tts import eager_attention_forward

    attn = layer.self_attn
    residual = hidden
    x = layer.input_layernorm(hidden)
    shape = (*x.shape[:-1], -1, attn.head_dim)
    q = attn.q_norm(attn.q_proj(x).view(shape)).transpose(1, 2)
    k = attn.k_norm(attn.k_proj(x).view(shape)).transpose(1, 2)
    v = attn.v_proj(x).view(shape).transpose(1, 2)
    q, k = rotate(q, k, cos, sin)
    k = torch.cat([past_k, k], dim=2)
    v = torch.cat([past_v, v], dim=2)
    out, _ = eager_attention_forward(attn, q, k, v, mask, scaling=attn.scaling)
    hidden = residual + attn.o_proj(out.reshape(*x.shape[:-1], -1))
    hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
    return hidden, k, v


def causal_mask(rows: int, past: int, keep=None):
    """Additive mask [1, 1, rows, past + rows]: row i sees keys up to past + i (and only the keys
    `keep` marks, when given)."""
    import torch
    cols = torch.arange(past + rows)
    allowed = cols[None, :] <= (torch.arange(rows) + past)[:, None]
    if keep is not None:
        allowed = allowed & (keep[0, None, :] > 0)
    return torch.where(allowed, 0.0, torch.finfo(torch.float32).min)[None, None]


def run_layers(layers, hidden, cos, sin, pasts, mask, rotate):
    """The decoder layers over `hidden`, each with its past (keys, values): (hidden, keys, values)."""
    keys, values = [], []
    for layer, (past_k, past_v) in zip(layers, pasts):
        hidden, k, v = attention_block(layer, hidden, cos, sin, past_k, past_v, mask, rotate)
        keys.append(k)
        values.append(v)
    return hidden, keys, values


def talker_graph(talker, stacked: bool):
    """talker_prefill (stacked False: per-layer KV outputs, no past) or talker_decode (stacked pasts
    in and out): embeddings -> (codec logits, final-norm hidden, KV)."""
    import torch
    from qwen_tts.core.models.modeling_qwen3_tts import apply_multimodal_rotary_pos_emb

    model, scaling, c = talker.model, talker.config.rope_scaling, talker.config

    def rotate(q, k, cos, sin):
        return apply_multimodal_rotary_pos_emb(q, k, cos, sin, scaling["mrope_section"], scaling["interleaved"])

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.talker = talker

        def forward(self, inputs_embeds, attention_mask, position_ids, past_keys=None, past_values=None):
            if stacked:
                pasts = [(past_keys[i], past_values[i]) for i in range(len(model.layers))]
            else:
                empty = inputs_embeds.new_zeros((1, c.num_key_value_heads, 0, c.head_dim))
                pasts = [(empty, empty)] * len(model.layers)
            cos, sin = model.rotary_emb(inputs_embeds, position_ids)
            mask = causal_mask(inputs_embeds.shape[1], pasts[0][0].shape[2], attention_mask)
            hidden, keys, values = run_layers(model.layers, inputs_embeds, cos, sin, pasts, mask, rotate)
            hidden = model.norm(hidden)
            if stacked:
                return talker.codec_head(hidden), hidden, torch.stack(keys), torch.stack(values)
            return (talker.codec_head(hidden), hidden, *[t for kv in zip(keys, values) for t in kv])

    return Graph().eval()


def code_predictor_graph(talker):
    """code_predictor: talker-width rows -> logits of head `generation_steps` for every row, and KV."""
    import torch
    from qwen_tts.core.models.modeling_qwen3_tts import apply_rotary_pos_emb

    cp = talker.code_predictor

    class Graph(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cp = cp
            self.heads = torch.nn.Parameter(torch.stack([h.weight for h in cp.lm_head]))   # [15, vocab, Dc]

        def forward(self, inputs_embeds, generation_steps, past_keys, past_values):
            rows, past = inputs_embeds.shape[1], past_keys.shape[3]
            hidden = cp.small_to_mtp_projection(inputs_embeds)
            cos, sin = cp.model.rotary_emb(hidden, (torch.arange(rows) + past)[None])
            pasts = [(past_keys[i], past_values[i]) for i in range(len(cp.model.layers))]
            hidden, keys, values = run_layers(cp.model.layers, hidden, cos, sin, pasts, causal_mask(rows, past),
                                              apply_rotary_pos_emb)
            head = torch.index_select(self.heads, 0, generation_steps)[0]
            return cp.model.norm(hidden) @ head.T, torch.stack(keys), torch.stack(values)

    return Graph().eval()


def export_graph(module, args, path: Path, inputs, outputs, dynamic) -> None:
    """TorchScript export (explicit shapes: no transformers mask functions to follow), then saved with
    its weights in one PATH.data file beside it, as the layout requires."""
    import tempfile

    import onnx
    import torch
    # (in a folder of its own: past 2 GB the exporter writes every weight to a file of its own)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp, torch.no_grad():
        first = Path(tmp) / path.name
        torch.onnx.export(module, args, str(first), input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                          opset_version=17, dynamo=False)
        model = onnx.load(str(first))
    save(model, path)


def save(model, path: Path) -> None:
    import onnx
    data = path.name + ".data"
    (path.parent / data).unlink(missing_ok=True)
    # (small tensors stay inline: shape inference reads constants such as Slice bounds from the graph)
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                    size_threshold=1024)


def quantize_int4(path: Path) -> None:
    """ONNX Runtime's MatMulNBits quantizer: 4-bit symmetric weights in blocks of 32, int8 compute."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    config = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True, accuracy_level=4)
    quantizer = MatMulNBitsQuantizer(onnx.load(str(path)), algo_config=config)
    quantizer.process()
    save(quantizer.model.model, path)


def export_lm_graphs(talker, folder: Path) -> None:
    import torch
    c = talker.config
    L, kvh, hd, D = c.num_hidden_layers, c.num_key_value_heads, c.head_dim, c.hidden_size
    rows, past = 5, 3
    embeds = torch.randn(1, rows, D) * 0.02
    pos = torch.arange(rows)[None, None].expand(3, 1, rows).contiguous()
    kv_names = [f"present_{kind}_{i}" for i in range(L) for kind in ("key", "value")]
    export_graph(talker_graph(talker, stacked=False), (embeds, torch.ones(1, rows, dtype=torch.long), pos),
                 folder / "talker_prefill.onnx", ["inputs_embeds", "attention_mask", "position_ids"],
                 ["logits", "hidden_states", *kv_names],
                 {"inputs_embeds": {1: "seq"}, "attention_mask": {1: "seq"}, "position_ids": {2: "seq"},
                  "logits": {1: "seq"}, "hidden_states": {1: "seq"}, **{n: {2: "seq"} for n in kv_names}})
    cache = torch.randn(L, 1, kvh, past, hd) * 0.1
    export_graph(talker_graph(talker, stacked=True),
                 (embeds[:, :1], torch.ones(1, past + 1, dtype=torch.long), torch.full((3, 1, 1), past), cache, cache),
                 folder / "talker_decode.onnx",
                 ["inputs_embeds", "attention_mask", "position_ids", "past_keys", "past_values"],
                 ["logits", "hidden_states", "present_keys", "present_values"],
                 {"attention_mask": {1: "total"}, "past_keys": {3: "past"}, "past_values": {3: "past"},
                  "present_keys": {3: "total"}, "present_values": {3: "total"}})
    cp = talker.code_predictor.config
    cache = torch.randn(cp.num_hidden_layers, 1, cp.num_key_value_heads, past, cp.head_dim) * 0.1
    export_graph(code_predictor_graph(talker), (embeds[:, :2], torch.tensor([1]), cache, cache),
                 folder / "code_predictor.onnx", ["inputs_embeds", "generation_steps", "past_keys", "past_values"],
                 ["logits", "present_keys", "present_values"],
                 {"inputs_embeds": {1: "seq"}, "logits": {1: "seq"}, "past_keys": {3: "past"},
                  "past_values": {3: "past"}, "present_keys": {3: "total"}, "present_values": {3: "total"}})


def export_vocoder(tokenizer_dir: Path, path: Path) -> None:
    import tempfile

    import onnx
    import torch
    from ort_decoder_bench import export   # same folder: the decoder as the ONNX Runtime decoder row runs it
    decoder, _ = load_decoder(tokenizer_dir)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        first = Path(tmp) / path.name
        export(decoder, torch.zeros(1, GROUPS, 20, dtype=torch.long), first, any_length=True)
        model = onnx.load(str(first))
    save(model, path)


def write_embeddings(talker, folder: Path) -> None:
    import numpy as np
    folder.mkdir()
    arrays = {"text_embedding": talker.model.text_embedding.weight,
              "text_projection_fc1_weight": talker.text_projection.linear_fc1.weight,
              "text_projection_fc1_bias": talker.text_projection.linear_fc1.bias,
              "text_projection_fc2_weight": talker.text_projection.linear_fc2.weight,
              "text_projection_fc2_bias": talker.text_projection.linear_fc2.bias,
              "talker_codec_embedding": talker.model.codec_embedding.weight,
              **{f"cp_codec_embedding_{i}": e.weight for i, e in enumerate(talker.code_predictor.model.codec_embedding)}}
    for name, tensor in arrays.items():
        np.save(folder / f"{name}.npy", tensor.detach().float().numpy())


# the layout's config: its name -> the reference config's, for the talker (talker_*) and code predictor (cp_*)
DIMENSIONS = {"hidden_size": "hidden_size", "num_layers": "num_hidden_layers", "num_attention_heads": "num_attention_heads",
              "num_kv_heads": "num_key_value_heads", "head_dim": "head_dim", "vocab_size": "vocab_size",
              "num_code_groups": "num_code_groups"}
TEXT_IDS = ("im_start_token_id", "im_end_token_id", "tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id")
CODEC_IDS = ("codec_eos_token_id", "codec_think_id", "codec_nothink_id", "codec_think_bos_id", "codec_think_eos_id",
             "codec_pad_id", "codec_bos_id")


def write_config(cfg, talker, path: Path, model_id: str) -> None:
    c, cp = talker.config, talker.code_predictor.config
    value = {"tts_model_type": "voice_design", "model_id": model_id, "sample_rate": 24000,
             **{f"talker_{ours}": getattr(c, theirs) for ours, theirs in DIMENSIONS.items()},
             **{f"cp_{ours}": getattr(cp, theirs) for ours, theirs in DIMENSIONS.items()},
             "talker_text_hidden_size": c.text_hidden_size,
             **{name: getattr(cfg, name) for name in TEXT_IDS}, **{name: getattr(c, name) for name in CODEC_IDS},
             "codec_language_id": dict(c.codec_language_id), "max_position_embeddings": c.max_position_embeddings}
    path.write_text(json.dumps(value, indent=2))


def write_tokenizer(hf_dir: Path, folder: Path) -> None:
    """The checkpoint's byte-level BPE (vocab.json, merges.txt, its special tokens) in the six files
    the layout lists, written by transformers' own Qwen2 tokenizer."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(hf_dir))
    tok.save_pretrained(str(folder))
    added = folder / "added_tokens.json"
    if not added.exists():
        added.write_text(json.dumps({t.content: i for i, t in tok.added_tokens_decoder.items()}, indent=2))


def build_bundle(hf_dir: Path, out: Path, quality: str) -> dict:
    import torch
    start = time.perf_counter()
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / quality).mkdir(parents=True)
    try:
        cfg, model = load_model(hf_dir)
        talker = model.talker
        with torch.no_grad():
            write_config(cfg, talker, partial / "config.json", f"kazeia-bench/{hf_dir.name}")
            write_tokenizer(hf_dir, partial / "tokenizer")
            write_embeddings(talker, partial / "embeddings")
            export_lm_graphs(talker, partial / quality)
        del talker, model
        if quality == "int4":
            for name in ("talker_prefill", "talker_decode", "code_predictor"):
                quantize_int4(partial / quality / f"{name}.onnx")
        export_vocoder(hf_dir / "speech_tokenizer", partial / quality / "vocoder.onnx")
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)   # (a failed export leaves no gigabytes behind)
        raise
    shutil.rmtree(out, ignore_errors=True)
    os.replace(partial, out)
    return {"bundle": str(out), "quality": quality, "export_s": time.perf_counter() - start}


def main():
    hf_dir, out, quality = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if quality not in ("fp32", "int4"):
        raise SystemExit(f"quality must be fp32 or int4, not {quality!r}")
    print(json.dumps(build_bundle(hf_dir, out, quality)), flush=True)


if __name__ == "__main__":
    main()
