"""Where each stage runs. Three modes per stage (talker, code predictor, decoder), generalising the
tablet engine's:

- `cpu`: the CPU backend on the file's weights.
- `accel-weights` (the tablet's "HTP weights"): every weight copied into memory an accelerator
  owns but the CPU can read (its host buffer type, or a host-visible buffer type of its own, as
  the Hexagon NPU offers), computed on by the CPU: bit-identical to `cpu`.
- `accel-sched` (the tablet's "HMX sched"): weights, caches and streaming state in the
  accelerator's memory and the graph run by ggml_backend_sched on it; an op the device cannot run
  falls back to the CPU, and the launch report names it. Without an accelerator it is the
  scheduler over the CPU alone.

Devices come from ggml's registry (`kazeia devices`)."""
from __future__ import annotations

from dataclasses import dataclass

from kazeia import _native

MODES = ("cpu", "accel-weights", "accel-sched")
STAGES = ("talker", "code_predictor", "decoder")
# what each mode was called in the tablet engine it generalises
TABLET_NAMES = {"cpu": "CPU", "accel-weights": "HTP weights", "accel-sched": "HMX sched"}
# one line per mode, for people choosing one (the workbench, `kazeia devices`)
MEANINGS = {
    "cpu": "the CPU computes, on the model file's weights",
    "accel-weights": "weights in the accelerator's host-visible memory, the CPU computes "
                     "(the tablet engine's \"HTP weights\")",
    "accel-sched": "ggml's scheduler sends each op to the accelerator that supports it "
                   "(the tablet engine's \"HMX sched\")",
}


@dataclass(frozen=True)
class ModeStatus:
    mode: str
    available: bool
    reason: str   # why not, or what it will use


def accelerators(devices: list[dict] | None = None) -> list[dict]:
    return [d for d in (devices if devices is not None else _native.devices()) if d["type"] != "cpu"]


def host_visible_buffer(device: dict) -> str:
    """The buffer type accel-weights puts weights in on `device`: its host buffer type, else a
    host-visible buffer type of its own (the Hexagon NPU has no host buffer type, but its own HTP0
    memory is host-visible), else ""."""
    if device.get("host_buffer_type"):
        return device["host_buffer_type"]
    return next((b["name"] for b in device.get("buffer_types", []) if b["is_host"]), "")


def weights_device(devices: list[dict] | None = None) -> dict | None:
    """The accelerator whose host-visible memory accel-weights uses: the first that has some."""
    return next((d for d in accelerators(devices) if host_visible_buffer(d)), None)


def sched_device(devices: list[dict] | None = None) -> dict | None:
    """The accelerator accel-sched runs on: the first GPU, else the first other accelerator."""
    accel = accelerators(devices)
    return next((d for d in accel if d["type"] in ("gpu", "igpu")), accel[0] if accel else None)


def mode_status(devices: list[dict] | None = None) -> dict[str, ModeStatus]:
    devices = devices if devices is not None else _native.devices()
    accel = accelerators(devices)
    names = ", ".join(d["name"] for d in devices) or "none"
    sched = sched_device(devices)
    sched_note = (f"{sched['name']} runs each stage (weights and caches in its memory); ops it cannot run "
                  "fall back to the CPU" if sched else
                  "no accelerator: the scheduler runs over the CPU backend alone")
    host = weights_device(devices)
    if host is not None:
        weights = ModeStatus("accel-weights", True, f"weights in {host_visible_buffer(host)} (host-visible memory of "
                                                    f"{host['name']}), computed on by the CPU")
    elif not accel:
        weights = ModeStatus("accel-weights", False, f"needs an accelerator device; ggml lists only: {names}")
    else:
        weights = ModeStatus("accel-weights", False, f"no accelerator offers host-visible memory "
                                                     f"({', '.join(d['name'] for d in accel)})")
    return {"cpu": ModeStatus("cpu", True, "ggml CPU backend"), "accel-weights": weights,
            "accel-sched": ModeStatus("accel-sched", True, sched_note)}


def resolve(placement: str | dict[str, str] | None) -> dict[str, str]:
    """A mode for every stage from one mode or a per-stage dict; unavailable modes raise
    ValueError with the reason."""
    if placement is None:
        placement = "cpu"
    chosen = {stage: placement for stage in STAGES} if isinstance(placement, str) else {**dict.fromkeys(STAGES, "cpu"), **placement}
    unknown = set(chosen) - set(STAGES)
    if unknown:
        raise ValueError(f"unknown stage {sorted(unknown)[0]!r}; stages are: {', '.join(STAGES)}")
    status = mode_status()
    for stage, mode in chosen.items():
        if mode not in MODES:
            raise ValueError(f"unknown placement {mode!r} for {stage}; choose one of: {', '.join(MODES)}")
        if not status[mode].available:
            raise ValueError(f"placement {mode} for {stage} is unavailable: {status[mode].reason}")
    return chosen


@dataclass(frozen=True)
class StagePlan:
    """What the native side needs for one stage's mode."""
    scheduled: bool = False
    weights_buffer: str = ""   # accel-weights
    device: str = ""           # accel-sched onto this accelerator ("" = the CPU alone)


def stage_plans(chosen: dict[str, str], devices: list[dict] | None = None) -> dict[str, StagePlan]:
    devices = devices if devices is not None else _native.devices()
    host, sched = weights_device(devices), sched_device(devices)
    plans = {}
    for stage, mode in chosen.items():
        if mode == "accel-weights":
            plans[stage] = StagePlan(weights_buffer=host_visible_buffer(host))
        elif mode == "accel-sched":
            plans[stage] = StagePlan(scheduled=True, device=sched["name"] if sched else "")
        else:
            plans[stage] = StagePlan()
    return plans


def where_it_ran(report: dict) -> str:
    """One line for a launch report: 'Vulkan0 612 ops, CPU 3 (2 splits, 1.2 MB copied); CPU
    fallbacks: ARGMAX: not supported by Vulkan0 x1'."""
    ops = ", ".join(f"{dev} {n}" for dev, n in sorted(report["ops"].items(), key=lambda kv: -kv[1]))
    line = f"{ops} ops"
    if report["scheduled"]:
        line += f" ({report['splits']} split{'s' if report['splits'] != 1 else ''}, {report['bytes_copied'] / 1e6:.2f} MB copied)"
    if report["fallbacks"]:
        line += "; CPU fallbacks: " + ", ".join(f"{what} x{n}" for what, n in sorted(report["fallbacks"].items()))
    return line


def silent_cpu_stages(reports: list[dict]) -> list[str]:
    """Stages scheduled onto an accelerator that ran any op on the CPU anyway (each a problem to
    name, never to hide): "<stage> <launch>: <fallbacks>"."""
    return [f"{r['stage']} {r['launch']}: " + ", ".join(f"{k} x{n}" for k, n in r["fallbacks"].items())
            for r in reports if r["scheduled"] and r["device"] and r["fallbacks"]]


STEADY_LAUNCH = {"talker": "step", "code_predictor": "frame", "decoder": "chunk"}   # what runs every frame


def stage_lines(reports: list[dict]) -> dict[str, str]:
    """One "where did it run" line per stage: its every-frame launch, and any CPU fallback of its
    other launches (a prefill that falls back must not hide behind a clean step)."""
    lines = {}
    for stage in STAGES:
        mine = [r for r in reports if r["stage"] == stage]
        if not mine:
            continue
        steady = next((r for r in mine if r["launch"] == STEADY_LAUNCH[stage]), mine[0])
        line = f"{steady['mode']}: {where_it_ran(steady)}" if "mode" in steady else where_it_ran(steady)
        others = [f"{r['launch']} falls back: " + ", ".join(r["fallbacks"]) for r in mine
                  if r is not steady and r["fallbacks"]]
        lines[stage] = "; ".join([line, *others])
    return lines
