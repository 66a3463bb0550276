"""`kazeia devices`: ggml's devices, the CPU level, placements checked."""
from __future__ import annotations

import json


def add_parser(sub) -> None:
    d = sub.add_parser("devices", help="list ggml devices")
    d.add_argument("--json", action="store_true")
    d.add_argument("--levels", action="store_true",
                   help="print only the CPU levels of Kazeia's kernels this CPU can run, highest first, on one line")
    d.add_argument("--kernels", action="store_true",
                   help="print only the ids of Kazeia's kernels that run at the level in force (KAZEIA_CPU), on one "
                        "line: two levels that print the same run the same code")
    d.add_argument("--check", action="store_true",
                   help="run every available placement on a model: where each stage ran, audio vs cpu")
    d.add_argument("--model", default="demo", help="model for --check (default: the demo model)")
    d.set_defaults(func=run)


def run(args) -> int:
    from kazeia import _native

    from ..platform_info import active_kernels, cpu_level, describe_cpu_level, ggml_build
    if args.levels:   # (for scripts: the levels to run the kernel checks at)
        print(*cpu_level()["available"])
        return 0
    if args.kernels:   # (for scripts: a level whose kernels a level above runs too needs no checks of its own)
        print(*sorted(active_kernels()) or ["none"])
        return 0
    devices = _native.devices()
    build, level = ggml_build(), cpu_level()
    if args.json:
        print(json.dumps({"ggml_build": {"flavor": build.flavor, "backends": list(build.backends), "stamp": build.stamp},
                          "cpu_level": level, "devices": devices}, indent=2))
        return 0
    print(f"{build.describe()} (setup.sh: {build.stamp or 'no record'})")
    for line in describe_cpu_level(level):
        print(line)
    for d in devices:
        caps = [c for c in ("async", "buffer_from_host_ptr", "events") if d[c]]
        if d["host_buffer_type"]:
            caps.append(f"host_buffer {d['host_buffer_type']}")
        print(f"{d['name']:<10} {d['type']:<6} {d['description']}  "
              f"memory {d['memory_free'] / 2**30:.1f}/{d['memory_total'] / 2**30:.1f} GiB  caps: {', '.join(caps) or '-'}")
    from ..synthesis.placement import mode_status
    print("placement modes:")
    for status in mode_status(devices).values():
        print(f"  {status.mode:<14} {'available' if status.available else 'unavailable'}: {status.reason}")
    return _check_placements(args.model) if args.check else 0


def _check_placements(model: str) -> int:
    """Every available placement on a model (default the demo): where each stage ran, and how far
    its audio is from the CPU's. Fails when a stage scheduled onto an accelerator ran ops on the CPU."""
    import numpy as np

    from ..accuracy import snr_db
    from ..model_files.demo import resolve_model
    from ..synthesis.requests import Request, SamplingParams
    from ..synthesis.engine import Engine
    from ..synthesis.placement import MODES, mode_status, silent_cpu_stages, stage_lines
    engine = Engine.load(resolve_model(model))
    sampling = SamplingParams.from_model(engine.info, max_frames=8).greedy()
    request = dict(speaker=engine.info.speakers[0].name) if engine.info.speakers else {}
    print(f"check on {model} (8 greedy frames; a first run on a new device compiles its kernels):")
    cpu, failed = None, False
    for mode in (m for m, st in mode_status().items() if st.available and m in MODES):
        engine.set_placement(mode)
        result = engine.take(Request("Where does each stage run?", sampling=sampling, **request))
        cpu = cpu if cpu is not None else result
        same = np.array_equal(result.codes, cpu.codes)
        decoded = engine.decode(cpu.codes)   # this placement's decoder on the CPU's codes
        print(f"  {mode}: codes {'identical to' if same else 'differ from'} cpu (random weights have flat logits), "
              f"decoder SNR vs cpu on the same codes {snr_db(cpu.audio, decoded):.1f} dB")
        for stage, line in stage_lines(result.placement_report).items():
            print(f"    {stage:<15} {line}")
        problems = silent_cpu_stages(result.placement_report)
        for p in problems:
            print(f"    ran on the CPU although scheduled onto an accelerator: {p}")
        failed = failed or bool(problems)
    return 1 if failed else 0
