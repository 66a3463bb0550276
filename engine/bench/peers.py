"""The engines Kazeia is measured against, run under their own interpreters: the PyTorch reference
(.venv-ref), vox-tts (.venv-vox), ONNX Runtime and qwen3synth (.venv-ort). Each script prints one JSON
line; a missing interpreter is a reason in the result, never an error."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

from ..model_files.model_file import ModelFile
from ..model_files.random_model import GENERATION_CONFIG, model_config, speech_tokenizer_config
from .text import BENCH_TEXT

# qwen3synth's bundles come in fp32 and int4; int4 (4-bit LM weights, f32 vocoder) is its CPU choice
QWEN3SYNTH_QUALITY = "int4"


def _in_project(env_var: str, relative: str) -> Path | None:
    """$env_var, else `relative` in the project folder (the one holding this interpreter's .venv),
    beside the source tree, or in the working folder: the benches' peers live in the checkout, not in
    the installed package."""
    env = os.environ.get(env_var)
    candidates = [Path(env)] if env else [Path(sys.prefix).parent / relative,
                                          Path(__file__).resolve().parents[2] / relative,
                                          Path.cwd() / relative]
    return next((p for p in candidates if p.exists()), None)


def _interpreter(env_var: str, venv: str) -> Path | None:
    return _in_project(env_var, f"{venv}/bin/python")


def peer_script(name: str) -> Path:
    """A script of peers/ in the project folder ($KAZEIA_PEERS_DIR names another): a missing one
    fails as its run would, with its path."""
    folder = _in_project("KAZEIA_PEERS_DIR", "peers") or Path.cwd() / "peers"
    return folder / name


def reference_python() -> Path | None:
    """The reference's interpreter: $KAZEIA_REF_PYTHON, else .venv-ref (tests/reference/setup_venv.sh)."""
    return _interpreter("KAZEIA_REF_PYTHON", ".venv-ref")


def vox_python() -> Path | None:
    """An interpreter with vox-tts: $KAZEIA_VOX_PYTHON, else .venv-vox (peers/setup_vox.sh)."""
    return _interpreter("KAZEIA_VOX_PYTHON", ".venv-vox")


def onnxruntime_python() -> Path | None:
    """An interpreter with ONNX Runtime, qwen3synth and the reference (to export its graphs):
    $KAZEIA_ORT_PYTHON, else .venv-ort (peers/setup_ort.sh)."""
    return _interpreter("KAZEIA_ORT_PYTHON", ".venv-ort")


def pipeline_peers(checkpoint: Path, threads: int) -> dict[str, Callable[[int], dict]]:
    """The installed peer engines that run a Hugging Face checkpoint end to end: name -> run(frames),
    which times one utterance of that many frames, or with 0 converts the checkpoint to the peer's
    own format (done before anything is timed)."""
    peers = {}
    if vox_python() is not None:
        peers["vox"] = lambda frames: run_script(
            vox_python(), "", peer_script("vox_bench.py"), checkpoint, checkpoint.parent / "vox-models", frames,
            threads, BENCH_TEXT, "vivian", "english")
    if onnxruntime_python() is not None:
        peers["qwen3synth"] = lambda frames: run_script(
            onnxruntime_python(), "", peer_script("qwen3synth_bench.py"), checkpoint,
            checkpoint.parent / "qwen3synth-bundles", QWEN3SYNTH_QUALITY, frames, threads, BENCH_TEXT, "english")
    return peers


def onnxruntime_decoder(tokenizer_dir: Path, codes, threads: int, runs: int) -> tuple[dict, "np.ndarray | None"]:
    """The reference's speech decoder exported to ONNX and run by ONNX Runtime (f32) on the weights of
    `tokenizer_dir` and these codes: its result and its audio (None when it did not run)."""
    import numpy as np
    with tempfile.TemporaryDirectory() as tmp:
        codes_path, wav_path = Path(tmp) / "codes.npy", Path(tmp) / "wav.npy"
        np.save(codes_path, np.asarray(codes, np.int32))
        r = run_script(onnxruntime_python(), "no ONNX Runtime interpreter (set KAZEIA_ORT_PYTHON or run "
                                             "peers/setup_ort.sh)",
                       peer_script("ort_decoder_bench.py"), tokenizer_dir, codes_path, threads, runs, wav_path)
        return r, np.load(wav_path) if r.get("available") else None


def run_reference_script(script: str, *args) -> dict:
    return run_script(reference_python(), "no reference interpreter (set KAZEIA_REF_PYTHON or run "
                                           "tests/reference/setup_venv.sh)", peer_script(script), *args)


def run_script(py: Path | None, missing: str, script: Path, *args) -> dict:
    """Runs a script under another interpreter; its last stdout line is a JSON object."""
    if py is None:
        return {"available": False, "reason": missing}
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run([str(py), str(script), *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=3600)
    if r.returncode != 0:
        return {"available": False, "reason": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    return {"available": True, **json.loads(r.stdout.strip().splitlines()[-1])}


def reference_tts(model: ModelFile, size: str, frames: int, threads: int) -> dict:
    """The PyTorch reference on a model of the same shapes (its own random values)."""
    tok = model.text_tokenizer()
    ids = tok.encode(f"<|im_start|>assistant\n{BENCH_TEXT}<|im_end|>\n<|im_start|>assistant\n")
    special = model.special_text_ids()
    cfg = model_config(size, "custom_voice", model.info.hparams["talker"]["text_vocab_size"],
                       dict(im_start_token_id=special["im_start"], im_end_token_id=special["im_end"],
                            tts_pad_token_id=special["tts_pad"], tts_bos_token_id=special["tts_bos"],
                            tts_eos_token_id=special["tts_eos"]))
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"config": cfg, "speech_tokenizer": speech_tokenizer_config(size), "input_ids": ids,
                   "speaker": "vivian", "generation_config": GENERATION_CONFIG}, f)
    try:
        return run_reference_script("tts_bench.py", f.name, frames, threads, 0)
    finally:
        Path(f.name).unlink(missing_ok=True)
