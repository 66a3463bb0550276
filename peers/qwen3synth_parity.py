"""Checks that qwen3synth, on the bundle qwen3synth_export.py makes of a checkpoint, runs the reference's
model: the codes it chooses greedily (top-k 1) for a VoiceDesign request equal, frame for frame, the
codes the reference (qwen-tts 0.1.1) chooses greedily for the same text and description on the same
checkpoint. Both run here, in the ONNX Runtime venv (peers/setup_ort.sh):

    python qwen3synth_parity.py HF_DIR BUNDLE QUALITY FRAMES TEXT LANGUAGE DESCRIPTION

Prints one JSON line: both frame counts, the frames equal before the first difference, and that
difference. Imports nothing from Kazeia.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json
import sys
from pathlib import Path

from qwen3synth_bench import open_runtime, synthesize  # same folder
from qwen3synth_export import load_model


def reference_codes(hf_dir: Path, text: str, language: str, description: str, frames: int):
    """The reference wrapper's VoiceDesign prompt (instruction, no speaker, whole text), greedy."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(hf_dir))
    ids = tok(f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n", return_tensors="pt").input_ids
    instruct = tok(f"<|im_start|>user\n{description}<|im_end|>\n", return_tensors="pt").input_ids
    _, model = load_model(hf_dir)
    with torch.inference_mode():
        codes, _ = model.generate(input_ids=[ids], instruct_ids=[instruct], languages=[language], speakers=[None],
                                  non_streaming_mode=True, max_new_tokens=frames + 1, do_sample=False,
                                  subtalker_dosample=False)
    return codes[0].tolist()


def peer_codes(bundle: Path, quality: str, text: str, language: str, description: str, frames: int):
    runtime = open_runtime(bundle, quality, threads=1, never_stop=False)
    kept, infer = {}, runtime._infer

    def keep(*args, **kwargs):   # the codes: the runtime's result carries only the audio
        kept["result"] = infer(*args, **kwargs)
        return kept["result"]

    runtime._infer = keep
    synthesize(runtime, text, language, frames, description=description, top_k=1, seed=0)
    return kept["result"].outputs["codes"].tolist()


def main():
    hf_dir, bundle, quality, frames, text, language, description = sys.argv[1:8]
    frames = int(frames)
    ours = peer_codes(Path(bundle), quality, text, language, description, frames)
    ref = reference_codes(Path(hf_dir), text, language, description, frames)
    equal = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
    print(json.dumps({"reference_frames": len(ref), "peer_frames": len(ours), "frames_equal": equal,
                      "first_difference": None if equal == min(len(ours), len(ref)) else
                      {"frame": equal, "reference": ref[equal], "peer": ours[equal]}}), flush=True)


if __name__ == "__main__":
    main()
