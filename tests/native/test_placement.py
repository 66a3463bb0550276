"""Placement modes per stage. Every test here is an `accel` test and runs twice in scripts/test.sh: on the CPU alone (the
scheduler over the CPU backend must give the CPU's codes and audio) and with Mesa's lavapipe as a
real Vulkan device (GGML_VK_VISIBLE_DEVICES=0), where accel-weights must stay bit-identical to the
CPU, accel-sched must run every op of every stage on the device, and its numbers must stay within
the tolerances measured for ggml-vulkan's fp16 arithmetic."""
from __future__ import annotations

import numpy as np
import pytest

from kazeia import _native
from kazeia.engine import Engine, Request, SamplingParams, open_model
from kazeia.engine.synthesis import placement as placements
from kazeia.engine.accuracy import decoder_snr_db, logit_divergence
from kazeia.engine.synthesis.placement import mode_status, resolve, silent_cpu_stages, where_it_ran

from support.goldens import case_request

ACCEL = placements.sched_device()   # None on the CPU-only pass
needs_accelerator = pytest.mark.skipif(ACCEL is None, reason="no accelerator here: the Vulkan pass of "
                                                              "scripts/test.sh runs this on lavapipe")
pytestmark = pytest.mark.accel


@pytest.fixture(scope="module")
def golden_engine(converted):
    """The CustomVoice case's f32 model in one engine, greedy sampling for its golden length."""
    variant, text, request, g = case_request("cv_dylan_chinese_stream")
    engine = Engine(open_model(converted(variant, "f32")), threads=2)
    sampling = SamplingParams.from_model(engine.info, max_frames=len(g["codes"])).greedy()
    return engine, text, request, g, sampling


def test_modes_report_availability_with_reasons():
    status = mode_status()
    assert status["cpu"].available and status["accel-sched"].available
    if ACCEL is None:
        assert not status["accel-weights"].available
        assert "CPU" in status["accel-weights"].reason
        assert "CPU backend alone" in status["accel-sched"].reason
    else:
        assert ACCEL["name"] in status["accel-sched"].reason
        assert status["accel-weights"].available == (placements.weights_device() is not None)


def test_bad_placements_are_clear_errors(converted):
    with pytest.raises(ValueError, match="unknown placement 'gpu-magic'"):
        resolve("gpu-magic")
    with pytest.raises(ValueError, match="unknown stage 'vocoder'"):
        resolve({"vocoder": "cpu"})
    if not mode_status()["accel-weights"].available:
        with pytest.raises(ValueError, match="accel-weights for talker is unavailable"):
            resolve("accel-weights")
    model = open_model(converted("custom_voice", "f32"))
    pool = _native.ThreadPool(1)
    for kwargs in ({"talker_scheduled": True, "talker_device": "NoSuchGPU"},
                   {"code_predictor_scheduled": True, "code_predictor_device": "CPU"}):
        with pytest.raises(ValueError, match="is unavailable: ggml has no accelerator of that name"):
            _native.TtsWeights(model.native, **kwargs)
    with pytest.raises(ValueError, match="'NoSuchGPU' is unavailable"):
        _native.SpeechDecoder(model.native, device="NoSuchGPU")


def test_accel_weights_uses_any_host_visible_memory_of_an_accelerator():
    """A host buffer type first; else a host-visible buffer type of the device's own. The Hexagon
    NPU (ggml 0.20) has no host buffer type, but its HTP0 memory is host-visible: the very NPU the
    tablet's "HTP weights" mode was made for must not be called unavailable."""
    cpu = {"name": "CPU", "type": "cpu", "host_buffer_type": "", "buffer_types": [{"name": "CPU", "is_host": True}]}
    npu = {"name": "NPU0", "type": "accel", "host_buffer_type": "NPU0_Host", "buffer_types": []}
    bare = {"name": "GPU0", "type": "gpu", "host_buffer_type": "", "buffer_types": [{"name": "GPU0", "is_host": False}]}
    htp = {"name": "HTP0", "type": "gpu", "host_buffer_type": "",
           "buffer_types": [{"name": "HTP0", "is_host": True}, {"name": "HTP0-REPACK", "is_host": False}]}
    assert not mode_status([cpu])["accel-weights"].available
    status = mode_status([cpu, bare])["accel-weights"]
    assert not status.available and "GPU0" in status.reason
    status = mode_status([cpu, bare, npu])["accel-weights"]
    assert status.available and "NPU0_Host" in status.reason and "CPU" in status.reason
    status = mode_status([cpu, htp])["accel-weights"]
    assert status.available and "weights in HTP0 " in status.reason
    plans = placements.stage_plans({"talker": "accel-weights", "code_predictor": "accel-sched", "decoder": "cpu"},
                                   [cpu, bare, htp])
    assert plans["talker"] == placements.StagePlan(weights_buffer="HTP0")
    assert plans["code_predictor"] == placements.StagePlan(scheduled=True, device="GPU0")   # a GPU first
    assert plans["decoder"] == placements.StagePlan()


@pytest.mark.parametrize("case", ["cv_dylan_chinese_stream", "base_icl_nonstream"])
def test_scheduler_over_the_cpu_alone_matches_cpu(converted, case, report, monkeypatch):
    """The scheduler path itself (over the CPU backend alone, as on a machine without accelerators)
    must not change a bit of the codes and at most rounding of the audio."""
    monkeypatch.setattr(placements, "sched_device", lambda devices=None: None)
    variant, text, request, g = case_request(case)
    model = open_model(converted(variant, "f32"))
    engine = Engine(model, threads=2)
    sampling = SamplingParams.from_model(model.info, max_frames=len(g["codes"])).greedy()
    cpu = engine.take(Request(text, sampling=sampling, **request))
    engine.set_placement("accel-sched")
    assert engine.model is model and engine.placement["decoder"] == "accel-sched"   # no reload
    sched = engine.take(Request(text, sampling=sampling, **request))
    assert np.array_equal(sched.codes, cpu.codes) and np.array_equal(sched.codes, g["codes"])
    err = float(np.abs(sched.audio - cpu.audio).max())
    assert err <= 1e-5
    reports = engine.placement_report()
    assert {r["stage"] for r in reports} == {"talker", "code_predictor", "decoder"}
    assert all(set(r["ops"]) == {"CPU"} and r["scheduled"] and not r["device"] and not r["fallbacks"] for r in reports)
    engine.set_placement({"talker": "cpu", "code_predictor": "accel-sched", "decoder": "cpu"})
    mixed = engine.take(Request(text, sampling=sampling, **request))
    assert np.array_equal(mixed.codes, cpu.codes)
    t_cpu, t_sched = cpu.timings, sched.timings
    report(f"placement {case}: cpu talker/cp/decoder {t_cpu.mean_ms('talker'):.2f}/{t_cpu.mean_ms('code_predictor'):.2f}/"
           f"{t_cpu.mean_ms('decoder'):.2f} ms per frame, accel-sched (CPU only) {t_sched.mean_ms('talker'):.2f}/"
           f"{t_sched.mean_ms('code_predictor'):.2f}/{t_sched.mean_ms('decoder'):.2f}; audio max diff {err:.1e}")


def test_cpu_placement_reports_every_launch_on_the_cpu(golden_engine):
    engine, text, request, g, sampling = golden_engine
    engine.set_placement("cpu")
    engine.take(Request(text, sampling=sampling, **request))
    reports = {(r["stage"], r["launch"]): r for r in engine.placement_report()}
    assert {("talker", "prefill"), ("talker", "step"), ("code_predictor", "frame"), ("decoder", "chunk")} <= set(reports)
    for r in reports.values():
        assert not r["scheduled"] and r["splits"] == 1 and r["ops"] == {"CPU": r["nodes"]} and r["nodes"] > 10
        assert r["bytes_copied"] == 0 and not r["fallbacks"]
        assert where_it_ran(r) == f"CPU {r['nodes']} ops"
    assert silent_cpu_stages(list(reports.values())) == []


def test_reports_name_ops_a_scheduled_stage_left_on_the_cpu():
    r = {"stage": "decoder", "launch": "chunk", "scheduled": True, "device": "Vulkan0", "splits": 3, "nodes": 10,
         "ops": {"Vulkan0": 8, "CPU": 2}, "bytes_copied": 2_500_000, "fallbacks": {"CUSTOM: not supported by Vulkan0": 2}}
    assert where_it_ran(r) == ("Vulkan0 8, CPU 2 ops (3 splits, 2.50 MB copied); "
                               "CPU fallbacks: CUSTOM: not supported by Vulkan0 x2")
    assert silent_cpu_stages([r]) == ["decoder chunk: CUSTOM: not supported by Vulkan0 x2"]


def test_accel_weights_path_matches_cpu(converted, monkeypatch):
    """accel-weights copies every weight into the accelerator's host-visible buffer type and computes
    on the CPU. With the CPU backend's own buffer type standing in for that buffer, the copies must
    give exactly what the file's weights give (the Vulkan pass repeats this on real Vulkan_Host memory)."""
    variant, text, request, g = case_request("cv_dylan_chinese_stream")
    model = open_model(converted(variant, "f32"))
    engine = Engine(model, threads=2)
    sampling = SamplingParams.from_model(model.info, max_frames=len(g["codes"])).greedy()
    cpu = engine.take(Request(text, sampling=sampling, **request))
    real = _native.devices()
    stand_in = {**real[-1], "name": "StandInNPU", "type": "accel", "host_buffer_type": "CPU"}
    monkeypatch.setattr(_native, "devices", lambda: [stand_in, *real])
    engine.set_placement({"talker": "accel-weights", "code_predictor": "accel-weights", "decoder": "accel-weights"})
    assert engine.model is model   # no reload
    copied = engine.take(Request(text, sampling=sampling, **request))
    assert np.array_equal(copied.codes, cpu.codes) and np.array_equal(copied.audio, cpu.audio)
    with pytest.raises(ValueError, match="no buffer type named 'NPU9_Host'"):
        _native.TtsWeights(model.native, talker_weights_buffer="NPU9_Host")
    with pytest.raises(ValueError, match="no buffer type named"):
        _native.SpeechDecoder(model.native, weights_buffer="NPU9_Host")


@needs_accelerator
def test_accel_weights_on_the_accelerator_is_bit_identical(golden_engine):
    engine, text, request, g, sampling = golden_engine
    engine.set_placement("cpu")
    cpu = engine.take(Request(text, sampling=sampling, **request))
    engine.set_placement("accel-weights")
    on_accel = engine.take(Request(text, sampling=sampling, **request))
    assert np.array_equal(on_accel.codes, cpu.codes) and np.array_equal(on_accel.audio, cpu.audio)
    assert all(set(r["ops"]) == {"CPU"} for r in engine.placement_report())   # computed by the CPU


# Tolerances of accel-sched against the CPU on the tiny f32 goldens, from what lavapipe measured
# (talker KL 1.1e-7, top-5 1.000; code predictor KL 7.9e-8, top-5 0.999; decoder SNR 60 dB) with
# margin for other devices' rounding; the bench measures full-size weights against vox's gate.
TALKER_KL, CP_KL, TOP5 = 1e-4, 1e-4, 0.98
DECODER_SNR_DB = 40.0


@needs_accelerator
def test_accel_sched_runs_every_op_on_the_accelerator_within_tolerance(golden_engine, report):
    engine, text, request, g, sampling = golden_engine
    ref = Engine(engine.model, threads=2)   # the CPU engine to compare against, same file
    engine.set_placement("accel-sched")
    assert engine.model is ref.model   # switching modes never reloads the file
    result = engine.take(Request(text, sampling=sampling, **request))
    assert len(result.codes) > 0 and np.isfinite(result.audio).all()
    reports = engine.placement_report()
    assert {r["stage"] for r in reports} == {"talker", "code_predictor", "decoder"}
    for r in reports:
        assert r["scheduled"] and r["device"] == ACCEL["name"]
        assert r["ops"].get(ACCEL["name"], 0) == r["nodes"] > 10, where_it_ran(r)
    assert silent_cpu_stages(reports) == []
    d = logit_divergence(ref, engine, text, request, g["codes"])
    snr = decoder_snr_db(ref, engine, g["codes"])
    report(f"accel-sched on {ACCEL['name']} vs cpu (tiny f32 goldens): talker KL {d['talker_kl']:.2e} top-5 "
           f"{d['talker_top5']:.3f}, code predictor KL {d['code_predictor_kl']:.2e} top-5 {d['code_predictor_top5']:.3f}, "
           f"decoder SNR {snr:.1f} dB; " + "; ".join(f"{r['stage']} {r['launch']}: {where_it_ran(r)}" for r in reports))
    assert d["talker_kl"] <= TALKER_KL and d["code_predictor_kl"] <= CP_KL
    assert d["talker_top5"] >= TOP5 and d["code_predictor_top5"] >= TOP5
    assert snr >= DECODER_SNR_DB
