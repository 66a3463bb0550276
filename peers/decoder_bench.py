"""Times the reference speech decoder (qwen-tts 0.1.1, PyTorch) at full size with random weights.

Run by the reference venv's interpreter: python decoder_bench.py FRAMES THREADS SEED
Prints one JSON line. Imports nothing from Kazeia.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # torch's spinning OpenMP threads starve 2-core machines

import importlib.machinery
import json
import sys
import time
import types


def stub_unused_modules():
    """qwen_tts imports its 25 Hz tokenizer eagerly (sox, onnxruntime, torchaudio); the 12 Hz
    decoder never uses them."""
    import transformers  # noqa: F401  (its import probes must see the real environment)

    def stub(name):
        m = types.ModuleType(name)
        m.__spec__ = importlib.machinery.ModuleSpec(name, None)
        return m

    for name in ("sox", "onnxruntime"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = stub(name)
    try:
        import torchaudio.compliance.kaldi  # noqa: F401
    except ImportError:
        ta, comp, kaldi = stub("torchaudio"), stub("torchaudio.compliance"), stub("torchaudio.compliance.kaldi")
        ta.compliance, comp.kaldi = comp, kaldi
        sys.modules.update({"torchaudio": ta, "torchaudio.compliance": comp, "torchaudio.compliance.kaldi": kaldi})


def build_decoder(seed):
    """The 12 Hz tokenizer's decoder at full size (0.6B and 1.7B share it), random weights from `seed`."""
    stub_unused_modules()
    import torch
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2DecoderConfig
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Decoder

    torch.manual_seed(seed)
    cfg = Qwen3TTSTokenizerV2DecoderConfig(
        codebook_size=2048, codebook_dim=512, num_quantizers=16, latent_dim=1024, hidden_size=512,
        intermediate_size=1024, num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=16,
        head_dim=64, rms_norm_eps=1e-5, rope_theta=10000, sliding_window=72, decoder_dim=1536,
        upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], layer_scale_initial_scale=0.01,
        max_position_embeddings=8000)
    cfg._attn_implementation = "sdpa"
    return Qwen3TTSTokenizerV2Decoder(cfg).eval()


def load_decoder(folder):
    """The decoder of a speech tokenizer folder in the released layout (config.json, model.safetensors
    with decoder.* tensors): the weights Kazeia converts from the same folder. Returns (decoder, the
    names it lacks: only the quantizer's input projections, which decoding never reads)."""
    stub_unused_modules()
    from pathlib import Path

    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Decoder
    from safetensors.torch import load_file

    folder = Path(folder)
    st = Qwen3TTSTokenizerV2Config(**json.loads((folder / "config.json").read_text()))
    st.decoder_config._attn_implementation = "sdpa"
    decoder = Qwen3TTSTokenizerV2Decoder(st.decoder_config).eval()
    state = {k[len("decoder."):]: v.float() for k, v in load_file(str(folder / "model.safetensors")).items()
             if k.startswith("decoder.")}
    missing, unexpected = decoder.load_state_dict(state, strict=False)
    if unexpected:
        raise SystemExit(f"tensors the decoder does not have: {unexpected[:5]}")
    return decoder, missing


def random_codes(frames, seed):
    import torch
    return torch.randint(0, 2048, (1, 16, frames), generator=torch.Generator().manual_seed(seed))


def main():
    frames, threads, seed = (int(a) for a in sys.argv[1:4])
    decoder = build_decoder(seed)
    import torch

    torch.set_num_threads(threads)
    codes = random_codes(frames, seed)
    times = []
    with torch.inference_mode():
        decoder.chunked_decode(codes[..., :min(frames, 8)])   # warm-up
        for _ in range(2):
            start = time.perf_counter()
            decoder.chunked_decode(codes)
            times.append(time.perf_counter() - start)
    best = min(times)
    print(json.dumps({"engine": "qwen-tts 0.1.1 (PyTorch %s, fp32)" % torch.__version__, "threads": threads,
                      "frames": frames, "ms_per_frame": 1000 * best / frames, "rtf": best / (frames * 0.08)}))


if __name__ == "__main__":
    main()
