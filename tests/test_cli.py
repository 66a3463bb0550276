"""The `kazeia` command line, run as a user would (subprocess)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from goldens import checkpoint_dir


def kazeia(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kazeia.engine", *map(str, args)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})


def test_convert_and_info(tmp_path):
    out = tmp_path / "cv.gguf"
    r = kazeia("convert", checkpoint_dir("custom_voice"), "-o", out, "--type", "q8_0", "-q")
    assert r.returncode == 0, r.stderr
    assert "source tensors consumed" in r.stdout
    r = kazeia("info", out, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["variant"] == "custom_voice" and info["file_type"] == "q8_0"
    assert "vivian" in [s["name"] for s in info["speakers"]]


def test_make_random_model_and_demo(tmp_path):
    r = kazeia("make-random-model", "-o", tmp_path / "r.gguf", "--variant", "base", "--seed", "5", "-q")
    assert r.returncode == 0, r.stderr
    assert "RANDOM WEIGHTS" in r.stdout and "speaker_encoder" in r.stdout
    r = kazeia("info", "demo", env={"KAZEIA_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0 and "RANDOM WEIGHTS" in r.stdout


def test_devices():
    r = kazeia("devices", "--json")
    assert r.returncode == 0
    assert any(d["type"] == "cpu" for d in json.loads(r.stdout))


def test_errors_are_messages_not_tracebacks(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00garbage")
    r = kazeia("info", bad)
    assert r.returncode == 2
    assert "error:" in r.stderr and "Traceback" not in r.stderr
    r = kazeia("convert", tmp_path / "nothing", "-o", tmp_path / "x.gguf")
    assert r.returncode == 2 and "not a folder" in r.stderr
