"""Measures how far the official reference moves from the committed goldens when only the way it
computes changes (torch threads, torch's CPU kernel level, MKL's instruction set), adds what other
CPUs were seen to give, and stores a tolerance per quantity for test_reference_live.py:

    .venv/bin/python tests/reference/measure_spread.py [--ref .venv-ref/bin/python] [--out FILE]
    .venv/bin/python tests/reference/measure_spread.py --this-cpu-too   (on another machine)

Each configuration regenerates the goldens with build_goldens.py in a subprocess (about 30 s
each). The tolerance of a quantity is MARGIN times the largest spread seen for it, in any
configuration or on any other CPU, and never below FLOOR_ULPS float32 ulps of the quantity's
largest committed magnitude (so a quantity that never moved here still admits rounding of its last
bits elsewhere). Integers, strings and checkpoint tensors are never given a tolerance: a
configuration in which one of them differs (a greedy code flipped) is recorded as beyond the
test's reach, with what differed, and its floats do not widen the tolerances.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_diff import compare  # noqa: E402

from kazeia.engine.platform_info import cpu_model  # noqa: E402  (run it with the project's venv)

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
GOLDEN = REPO / "tests" / "golden"
SPREAD_FILE = HERE / "reference_spread.json"
MARGIN = 4.0
FLOOR_ULPS = 16
EPS32 = float(np.finfo(np.float32).eps)

# The ways the reference may compute on another machine, each reachable on this one.
CONFIGURATIONS = {
    "threads=2": {"threads": 2, "env": {}},
    "ATEN_CPU_CAPABILITY=avx2": {"threads": 1, "env": {"ATEN_CPU_CAPABILITY": "avx2"}},
    # torch without SIMD kernels, what a CPU without AVX2 gets: measured to show where the line is
    "ATEN_CPU_CAPABILITY=default": {"threads": 1, "env": {"ATEN_CPU_CAPABILITY": "default"}},
    "MKL_ENABLE_INSTRUCTIONS=SSE4_2": {"threads": 1, "env": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}},
    "threads=2, ATEN_CPU_CAPABILITY=avx2": {"threads": 2, "env": {"ATEN_CPU_CAPABILITY": "avx2"}},
    "threads=1 (again: the same run must be exact)": {"threads": 1, "env": {}},
}

# Spreads seen on other CPUs against the committed goldens (made on an AMD EPYC with AVX-512), as
# reported; a pattern without a file name applies to that array in every file (the report did not
# name the case).
OTHER_CPUS = {
    "Intel Xeon Sapphire Rapids (AVX-512 VNNI/BF16/FP16, AMX), issue 23": {
        "*.npz:talker_prefill_embeds": 9.5e-07,
        "decoder_long.npz:wav_chunked": 1.5e-06,
        "decoder_stages.npz:decoder_0_conv_in": 1.2e-06,
        "manifest.json:decoder_long.max_abs_diff_chunked_vs_full": abs(0.06874393671751022 - 0.06874442100524902),
    },
}


def regenerate(ref_python: str, threads: int, env: dict, out: Path) -> None:
    run_env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **env}
    run_env.pop("PYTHONPATH", None)
    r = subprocess.run([ref_python, str(HERE / "build_goldens.py"), "--out", str(out), "--threads", str(threads)],
                       capture_output=True, text=True, env=run_env, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"build_goldens.py failed ({threads} threads, {env}):\n{r.stderr[-3000:]}")


def tolerances(spread: dict[str, dict[str, float]], magnitudes: dict[str, float],
               other_cpus: dict[str, dict[str, float]]) -> dict[str, float]:
    out = {}
    for q, mag in sorted(magnitudes.items()):
        seen = list(spread.get(q, {}).values())
        for figures in other_cpus.values():
            seen += [v for pattern, v in figures.items() if fnmatch.fnmatchcase(q, pattern)]
        out[q] = float(max(MARGIN * max(seen, default=0.0), FLOOR_ULPS * EPS32 * mag))
    return out


def add_this_cpu(ref_python: str, path: Path) -> int:
    """The goldens regenerated on this CPU, its diffs kept beside the file's other CPUs: a second
    machine widens the tolerances to what the reference really does there."""
    record = json.loads(path.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for threads in (1, 2):
            name = f"{cpu_model()}, {threads} thread{'s' if threads > 1 else ''} (measured)"
            out = Path(tmp) / f"threads-{threads}"
            print(f"regenerating: {name}", flush=True)
            regenerate(ref_python, threads, {}, out)
            diff = compare(GOLDEN, out)
            if diff.mismatches:
                print(f"  {len(diff.mismatches)} exact mismatches (e.g. {diff.mismatches[0]}): not a rounding "
                      "spread; nothing recorded", file=sys.stderr)
                return 1
            moved = {q: d for q, d in diff.float_diffs.items() if d > 0}
            record["other_cpus"][name] = moved
            print(f"  {len(moved)} of {len(diff.float_diffs)} float quantities moved, largest "
                  f"{max(moved.values(), default=0.0):.3g}", flush=True)
    before = record["tolerance"]
    record["tolerance"] = tolerances(record["spread"], record["magnitude"], record["other_cpus"])
    wider = sum(record["tolerance"][q] > before.get(q, 0.0) for q in record["tolerance"])
    path.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    print(f"wrote {path}: {wider} of {len(record['tolerance'])} tolerances widened")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ref", default=os.environ.get("KAZEIA_REF_PYTHON", str(REPO / ".venv-ref" / "bin" / "python")))
    ap.add_argument("--out", default=str(SPREAD_FILE))
    ap.add_argument("--this-cpu-too", action="store_true",
                    help="keep the file's measurements and add this CPU's spread (torch at 1 and 2 threads) as "
                         "another CPU's, then recompute the tolerances")
    args = ap.parse_args(argv)
    if args.this_cpu_too:
        return add_this_cpu(args.ref, Path(args.out))
    spread: dict[str, dict[str, float]] = {}
    magnitudes: dict[str, float] = {}
    beyond: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in CONFIGURATIONS.items():
            out = Path(tmp) / name.replace(" ", "_").replace("=", "-")
            print(f"regenerating: {name}", flush=True)
            regenerate(args.ref, cfg["threads"], cfg["env"], out)
            diff = compare(GOLDEN, out)
            magnitudes = magnitudes or diff.magnitudes
            moved = {q: d for q, d in diff.float_diffs.items() if d > 0}
            if diff.mismatches:
                beyond[name] = {"exact_mismatches": diff.mismatches[:20], "n_exact_mismatches": len(diff.mismatches),
                                "largest_float_diff": max(moved.values(), default=0.0)}
            else:
                for q, d in moved.items():
                    spread.setdefault(q, {})[name] = d
            print(f"  {len(moved)} of {len(diff.float_diffs)} float quantities moved, largest "
                  f"{max(moved.values(), default=0.0):.3g}; {len(diff.mismatches)} exact mismatches", flush=True)
    if "threads=1 (again: the same run must be exact)" in beyond or \
            any(spread.get(q, {}).get("threads=1 (again: the same run must be exact)") for q in spread):
        print("the same run twice gave different results: the reference is not reproducible here", file=sys.stderr)
        return 1
    # what other machines measured (--this-cpu-too) stays: this machine cannot measure it again
    other_cpus = dict(OTHER_CPUS)
    if Path(args.out).exists():
        kept = json.loads(Path(args.out).read_text()).get("other_cpus", {})
        other_cpus.update({name: figures for name, figures in kept.items() if name.endswith("(measured)")})
    record = {
        "about": "the official reference's own spread against tests/golden/, per float quantity, and the tolerance "
                 "test_reference_live.py allows it (tests/reference/measure_spread.py wrote this file)",
        "measured_on": cpu_model(),
        "rule": f"tolerance = max({MARGIN:g} x the largest spread seen, {FLOOR_ULPS} float32 ulps of the largest "
                f"committed magnitude)",
        "configurations": CONFIGURATIONS,
        "spread": spread,
        "beyond_reach": {"about": "configurations in which the reference's exact parts (greedy codes, ids) changed: "
                                  "the live test fails there by design", **beyond},
        "other_cpus": other_cpus,
        "magnitude": magnitudes,
        "tolerance": tolerances(spread, magnitudes, other_cpus),
    }
    Path(args.out).write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    print(f"wrote {args.out}: {len(record['tolerance'])} quantities, {len(spread)} moved in some configuration")
    return 0


if __name__ == "__main__":
    sys.exit(main())
