"""The peer qwen3synth, as `kazeia bench` runs it, runs the reference's model: the bundle
qwen3synth_export.py makes of the reference's tiny VoiceDesign checkpoint passes onnxvoice's own
layout and graph checks, and qwen3synth's greedy codes on it equal the reference's greedy codes
frame for frame (both computed here, in the ONNX Runtime venv).

Needs that venv (peers/setup_ort.sh, or KAZEIA_ORT_PYTHON); skipped without it, like the
bench's peer rows it checks. ~1 min on 2 CPUs.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support.goldens import checkpoint_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = REPO_ROOT / "engine" / "reference"
ORT_PYTHON = Path(os.environ.get("KAZEIA_ORT_PYTHON", REPO_ROOT / ".venv-ort" / "bin" / "python"))

pytestmark = pytest.mark.skipif(not ORT_PYTHON.exists(), reason=f"no ONNX Runtime venv at {ORT_PYTHON} "
                                                                 "(peers/setup_ort.sh)")


def run(script: str, *args) -> dict:
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("PYTHONPATH", None)
    r = subprocess.run([str(ORT_PYTHON), str(SCRIPTS / script), *map(str, args)], capture_output=True, text=True,
                       env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_greedy_codes_equal_the_reference(tmp_path):
    hf = checkpoint_dir("voice_design")
    bundle = tmp_path / "bundle"
    made = run("qwen3synth_export.py", hf, bundle, "fp32")
    assert made["bundle"] == str(bundle) and (bundle / "fp32" / "talker_decode.onnx.data").exists()
    r = run("qwen3synth_parity.py", hf, bundle, "fp32", 24, "Hello there, this is the peer's parity check.",
            "english", "A calm, low voice.")
    assert r["reference_frames"] == 24, r         # (no end-of-speech code chosen on this checkpoint)
    assert r["peer_frames"] == r["reference_frames"], r
    assert r["frames_equal"] == r["reference_frames"] and r["first_difference"] is None, r
