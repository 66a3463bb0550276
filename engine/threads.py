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
