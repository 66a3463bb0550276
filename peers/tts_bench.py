"""Times the reference engine (qwen-tts 0.1.1, PyTorch fp32) end to end at full size with random
weights: prefill, talker step, code-predictor frame (HF generate), decoder per frame.

Run by the reference venv's interpreter: python tts_bench.py CONFIG_JSON FRAMES THREADS SEED
(CONFIG_JSON: {"config": <config.json>, "speech_tokenizer": <speech_tokenizer/config.json>}).
Prints one JSON line. Imports nothing from Kazeia.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json
import sys
import time
from pathlib import Path

from decoder_bench import stub_unused_modules  # same folder
sys.path.append(str(Path(__file__).resolve().parents[1] / "engine"))   # proc_stats (standard library only)
from proc_stats import peak_rss_mb  # noqa: E402


def main():
    cfg_path, frames, threads, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    stub_unused_modules()
    import torch
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Config
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Decoder

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    with open(cfg_path) as f:
        cfgs = json.load(f)
    cfg = Qwen3TTSConfig(**cfgs["config"])
    cfg._attn_implementation = "sdpa"
    start = time.perf_counter()
    model = Qwen3TTSForConditionalGeneration(cfg).eval()
    st = Qwen3TTSTokenizerV2Config(**cfgs["speech_tokenizer"])
    st.decoder_config._attn_implementation = "sdpa"
    decoder = Qwen3TTSTokenizerV2Decoder(st.decoder_config).eval()
    build_s = time.perf_counter() - start

    talker, cp = model.talker, model.talker.code_predictor
    times = {"talker": [], "cp": []}

    def timed(fn, key):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            out = fn(*a, **kw)
            times[key].append(time.perf_counter() - t0)
            return out
        return wrapper

    talker.model.forward = timed(talker.model.forward, "talker")
    cp.generate = timed(cp.generate, "cp")
    ids = torch.tensor([cfgs["input_ids"]])
    speaker = cfgs.get("speaker")
    with torch.inference_mode():
        codes, _ = model.generate(input_ids=[ids], languages=["english"], speakers=[speaker], non_streaming_mode=True,
                                  max_new_tokens=frames + 1, do_sample=True, subtalker_dosample=True)
        c = codes[0].T[None].clamp(min=0)
        t0 = time.perf_counter()
        decoder.chunked_decode(c)
        dec_s = time.perf_counter() - t0
    n = codes[0].shape[0]
    talker_steps = times["talker"][1:]
    talker_ms = 1000 * sum(talker_steps) / max(len(talker_steps), 1)
    cp_ms = 1000 * sum(times["cp"]) / max(len(times["cp"]), 1)
    dec_ms = 1000 * dec_s / max(n, 1)
    print(json.dumps({
        "engine": "qwen-tts 0.1.1 (PyTorch %s, fp32, sdpa)" % torch.__version__, "threads": threads, "frames": n,
        "build_s": build_s, "prefill_ms": 1000 * times["talker"][0], "talker_ms_per_frame": talker_ms,
        "code_predictor_ms_per_frame": cp_ms, "decoder_ms_per_frame": dec_ms,
        "total_ms_per_frame": talker_ms + cp_ms + dec_ms, "rtf": (talker_ms + cp_ms + dec_ms) / 80.0,
        "peak_rss_mb": peak_rss_mb()}))


if __name__ == "__main__":
    main()
