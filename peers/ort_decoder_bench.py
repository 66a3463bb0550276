"""Times the reference speech decoder exported to ONNX and run by ONNX Runtime on the CPU (f32), as
the ONNX ports of Qwen3-TTS run it: the whole utterance in one call. The weights are those of a
speech tokenizer folder in the released layout (the bench's shared checkpoint, which Kazeia
converts), the codes those Kazeia decodes; the audio is written for the accuracy comparison.

Run by the ONNX Runtime venv's interpreter (peers/setup_ort.sh):
    python ort_decoder_bench.py TOKENIZER_DIR CODES_NPY THREADS RUNS OUT_NPY
(CODES_NPY: int32 [frames, 16]). Prints one JSON line. Imports nothing from Kazeia.
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import json
import sys
import tempfile
import time
from pathlib import Path

from decoder_bench import load_decoder  # same folder


def export(decoder, codes, path: Path, any_length: bool = False) -> None:
    """Through torch.export (the TorchScript tracer cannot follow transformers' mask functions), at
    the utterance's own length, or for any number of frames."""
    import torch

    class Whole(torch.nn.Module):   # codes [1, 16, T] -> wav [1, 1, T * 1920]
        def __init__(self, d):
            super().__init__()
            self.d = d

        def forward(self, codes):
            return self.d(codes)

    with torch.no_grad():
        dynamic = {"codes": {2: torch.export.Dim("frames", min=1, max=65536)}} if any_length else None
        torch.onnx.export(Whole(decoder).eval(), (codes,), str(path), input_names=["codes"], output_names=["wav"],
                          opset_version=18, dynamo=True, verbose=False, dynamic_shapes=dynamic)


def main():
    folder, codes_path, threads, runs, out_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    import numpy as np
    import onnxruntime as ort
    import torch

    torch.set_num_threads(threads)
    decoder, missing = load_decoder(folder)
    codes = torch.from_numpy(np.load(codes_path).astype(np.int64).T[None].copy())   # [1, 16, frames]
    frames = codes.shape[-1]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "decoder.onnx"
        export(decoder, codes, path)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = {"codes": codes.numpy()}
    wav = session.run(None, feed)[0].reshape(-1)   # (also the warm-up)
    times = []
    for _ in range(max(runs, 1)):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    with torch.no_grad():   # the export is the reference: the same audio as PyTorch's
        want = decoder(codes).numpy().reshape(-1)
    np.save(out_path, wav.astype(np.float32))
    best = float(np.median(times))
    print(json.dumps({"engine": f"ONNX Runtime {ort.__version__} (CPU, fp32; the reference's decoder exported by "
                                f"PyTorch {torch.__version__})",
                      "threads": threads, "frames": frames, "ms_per_frame": 1000 * best / frames,
                      "runs_ms_per_frame": [1000 * t / frames for t in times], "rtf": best / (frames * 0.08),
                      "max_abs_vs_pytorch": float(np.abs(wav - want).max()), "audio_rms": float(np.sqrt(np.mean(want ** 2))),
                      "weights_not_in_folder": len(missing)}))


if __name__ == "__main__":
    main()
