"""Where each stage runs. Three modes per stage (talker, code predictor, decoder), named after the
tablet engine's: `cpu`; `accel-weights` (weights in an accelerator's host-visible buffer, compute on
the CPU: "HTP weights"); `accel-sched` (ggml_backend_sched over accelerators + CPU, ops a device
cannot run fall back to the CPU: "HMX sched"). Devices come from ggml's registry."""
from __future__ import annotations

from dataclasses import dataclass

from kazeia import _native

MODES = ("cpu", "accel-weights", "accel-sched")
STAGES = ("talker", "code_predictor", "decoder")


@dataclass(frozen=True)
class ModeStatus:
    mode: str
    available: bool
    reason: str   # why not, or what it will use


def accelerators(devices: list[dict] | None = None) -> list[dict]:
    return [d for d in (devices if devices is not None else _native.devices()) if d["type"] != "cpu"]


def weights_device(devices: list[dict] | None = None) -> dict | None:
    """The accelerator whose host-visible buffer accel-weights uses: the first that has one."""
    return next((d for d in accelerators(devices) if d.get("host_buffer_type")), None)


def mode_status(devices: list[dict] | None = None) -> dict[str, ModeStatus]:
    devices = devices if devices is not None else _native.devices()
    accel = accelerators(devices)
    names = ", ".join(d["name"] for d in devices) or "none"
    sched_note = (f"scheduler over {', '.join(d['name'] for d in accel)} + CPU" if accel else
                  "no accelerator: the scheduler runs over the CPU backend alone")
    host = weights_device(devices)
    if host is not None:
        weights = ModeStatus("accel-weights", True, f"weights in {host['host_buffer_type']} (host-visible memory of "
                                                    f"{host['name']}), computed on by the CPU")
    elif not accel:
        weights = ModeStatus("accel-weights", False, f"needs an accelerator device; ggml lists only: {names}")
    else:
        weights = ModeStatus("accel-weights", False, f"no accelerator offers a host-visible buffer "
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
