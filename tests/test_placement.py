"""Placement modes per stage. On a CPU-only machine the scheduler path still runs (over the CPU
backend) and must give the same codes and audio as plain CPU compute."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia import _native
from kazeia.engine import Engine, SamplingParams, open_model
from kazeia.engine.placement import mode_status, resolve

from test_tts import case_request


def test_modes_report_availability_with_reasons():
    status = mode_status()
    assert status["cpu"].available and status["accel-sched"].available
    if not any(d["type"] != "cpu" for d in _native.devices()):
        assert not status["accel-weights"].available
        assert "CPU" in status["accel-weights"].reason
        assert "CPU backend alone" in status["accel-sched"].reason


def test_bad_placements_are_clear_errors():
    with pytest.raises(ValueError, match="unknown placement 'gpu-magic'"):
        resolve("gpu-magic")
    with pytest.raises(ValueError, match="unknown stage 'vocoder'"):
        resolve({"vocoder": "cpu"})
    if not mode_status()["accel-weights"].available:
        with pytest.raises(ValueError, match="accel-weights for talker is unavailable"):
            resolve("accel-weights")


@pytest.mark.parametrize("case", ["cv_dylan_chinese_stream", "base_icl_nonstream"])
def test_scheduler_path_matches_cpu(converted, case, report):
    variant, text, request, g = case_request(case)
    model = open_model(converted(variant, "f32"))
    engine = Engine(model, threads=2)
    sampling = SamplingParams.from_model(model.info, max_frames=len(g["codes"])).greedy()
    cpu = engine.synthesize(text, sampling=sampling, **request)
    engine.set_placement("accel-sched")
    assert engine.model is model and engine.placement["decoder"] == "accel-sched"   # no reload
    sched = engine.synthesize(text, sampling=sampling, **request)
    assert np.array_equal(sched.codes, cpu.codes) and np.array_equal(sched.codes, g["codes"])
    err = float(np.abs(sched.audio - cpu.audio).max())
    assert err <= 1e-5
    engine.set_placement({"talker": "cpu", "code_predictor": "accel-sched", "decoder": "cpu"})
    mixed = engine.synthesize(text, sampling=sampling, **request)
    assert np.array_equal(mixed.codes, cpu.codes)
    t_cpu, t_sched = cpu.timings, sched.timings
    report(f"placement {case}: cpu talker/cp/decoder {t_cpu.mean_ms('talker'):.2f}/{t_cpu.mean_ms('code_predictor'):.2f}/"
           f"{t_cpu.mean_ms('decoder'):.2f} ms per frame, accel-sched (CPU only) {t_sched.mean_ms('talker'):.2f}/"
           f"{t_sched.mean_ms('code_predictor'):.2f}/{t_sched.mean_ms('decoder'):.2f}; audio max diff {err:.1e}")


def test_accel_weights_needs_an_accelerator_with_a_host_buffer():
    cpu = {"name": "CPU", "type": "cpu", "host_buffer_type": ""}
    npu = {"name": "NPU0", "type": "accel", "host_buffer_type": "NPU0_Host"}
    bare = {"name": "GPU0", "type": "gpu", "host_buffer_type": ""}
    assert not mode_status([cpu])["accel-weights"].available
    status = mode_status([cpu, bare])["accel-weights"]
    assert not status.available and "GPU0" in status.reason
    status = mode_status([cpu, bare, npu])["accel-weights"]
    assert status.available and "NPU0_Host" in status.reason and "CPU" in status.reason


def test_accel_weights_path_matches_cpu(converted, monkeypatch):
    """accel-weights copies every weight into the accelerator's host-visible buffer type and computes
    on the CPU. With the CPU backend's own buffer type standing in for that buffer, the copies must
    give exactly what the file's weights give."""
    variant, text, request, g = case_request("cv_dylan_chinese_stream")
    model = open_model(converted(variant, "f32"))
    engine = Engine(model, threads=2)
    sampling = SamplingParams.from_model(model.info, max_frames=len(g["codes"])).greedy()
    cpu = engine.synthesize(text, sampling=sampling, **request)
    real = _native.devices()
    stand_in = {**real[0], "name": "StandInNPU", "type": "accel", "host_buffer_type": "CPU"}
    monkeypatch.setattr(_native, "devices", lambda: [*real, stand_in])
    engine.set_placement({"talker": "accel-weights", "code_predictor": "accel-weights", "decoder": "accel-weights"})
    assert engine.model is model   # no reload
    copied = engine.synthesize(text, sampling=sampling, **request)
    assert np.array_equal(copied.codes, cpu.codes) and np.array_equal(copied.audio, cpu.audio)
    with pytest.raises(ValueError, match="no buffer type named 'NPU9_Host'"):
        _native.TtsEngine(model.native, engine._pool, talker_weights_buffer="NPU9_Host")
    with pytest.raises(ValueError, match="no buffer type named"):
        _native.SpeechDecoder(model.native, weights_buffer="NPU9_Host")


def test_repacked_q4k_matrices_multiply_like_the_file_layout():
    """On the CPU, q4_K matrices are copied into ggml's interleaved layout (CPU_REPACK) for faster
    products; both layouts hold the same quantised values, so only the summation order differs."""
    for n in (1, 2, 17):   # the talker step, the padded single column, a prompt
        made, plain, repacked = _native.compare_repacked_matmul(64, 1024, n, seed=n)
        if not made:
            pytest.skip("ggml has no repacked q4_K layout for this CPU (it needs AVX2)")
        assert plain.shape == repacked.shape == (n, 64)
        assert np.abs(plain - repacked).max() <= 1e-5 * np.abs(plain).max()


def test_one_column_q8_0_kernel_matches_ggml():
    """On the CPU, the talker's and code predictor's one-column q8_0 products use Kazeia's kernel
    (four accumulators per row, one linear stream per thread); the vector is quantised as ggml does,
    so only the order of the float sums may differ."""
    cases = [(64, 1024), (1031, 3072), (7, 96), (1, 32)]   # odd row counts split unevenly between threads
    for (rows, cols), avx2_only in [(c, False) for c in cases] + [(cases[1], True)]:   # and without VNNI
        applied, ggml, ours = _native.compare_gemv_q8_0(rows, cols, seed=rows, avx2_only=avx2_only)
        if not applied:
            pytest.skip("the kernel needs AVX2, FMA and F16C")
        assert ggml.shape == ours.shape == (rows,)
        assert np.abs(ggml - ours).max() <= 1e-6 * np.abs(ggml).max()
