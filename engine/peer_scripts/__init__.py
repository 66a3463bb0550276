"""The other engines beside Kazeia, in one place: the scripts their own interpreters run for the
side-by-side benchmarks (the official PyTorch reference in .venv-ref, vox-tts in .venv-vox, ONNX
Runtime and qwen3synth in .venv-ort; never imported by Kazeia itself; see kazeia.engine.bench.peers)
and the scripts that set those venvs up (setup_vox.sh, setup_ort.sh; the reference's is
tests/reference/setup_venv.sh, which the tests need too)."""
