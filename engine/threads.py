"""Thread counts: never more compute threads than the cores this process may run on."""
from __future__ import annotations

import os


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not on Linux
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    env = os.environ.get("KAZEIA_THREADS")
    if env:
        return max(1, int(env))
    return available_cores()


def check_threads(threads: int) -> int:
    """A compute thread count this process can run: ggml's workers spin at every op barrier, so
    one more than the free cores stalls them all (minutes instead of seconds)."""
    cores = available_cores()
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a whole number from 1 to {cores}, got {threads!r}")
    if threads > cores:
        raise ValueError(f"threads={threads} is more than the {cores} core(s) this process may use: ggml's "
                         f"workers wait on each other at every op, so extra threads stall the engine")
    return threads
