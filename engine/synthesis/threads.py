"""Thread counts: never more compute threads than the cores this process may run on, and fewer
while other processes hold some of them."""
from __future__ import annotations

import os
import time

from .overlap import decoder_threads


def available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:   # not on Linux
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    env = os.environ.get("KAZEIA_THREADS")
    if env:
        try:
            return check_threads(int(env))
        except ValueError as e:
            raise ValueError(f"KAZEIA_THREADS={env!r}: {e}" if env.strip().lstrip("-").isdigit() else
                             f"KAZEIA_THREADS={env!r}: a whole number of threads, 1 to {available_cores()}") from None
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


def _cpu_jiffies(cpus: set[int]) -> tuple[int, int] | None:
    """(busy, total) jiffies of these CPUs since boot (/proc/stat), or None where there is none."""
    try:
        with open("/proc/stat") as f:
            busy = total = 0
            for line in f:
                if not line.startswith("cpu") or line.startswith("cpu "):
                    continue
                name, *values = line.split()
                if int(name[3:]) in cpus:
                    v = [int(x) for x in values[:8]]
                    total += sum(v)
                    busy += sum(v) - v[3] - v[4]   # minus idle and iowait
            return busy, total
    except (OSError, ValueError):
        return None


class ThreadPolicy:
    """How many of the pool's threads each launch uses, from how busy the machine's other processes
    keep this process's cores. ggml's workers spin at every op barrier: where another process holds
    a core, a descheduled worker stalls the others, and one fewer worker is faster (0.6B q8_0 on 2
    cores with one busy process pinned to a core: RTF 2.2 on one thread against 4.0 on two; idle, two
    threads give 1.4). Every `period` seconds of synthesis it compares the cores' busy time (/proc/stat)
    with this process's own CPU time; what is left is what other processes use, and the launches use
    the cores that remain (at least one). One policy for the CLI, the API and the workbench."""

    def __init__(self, pool, adaptive: bool = True, period: float = 0.25, smoothing: float = 0.5):
        self.pool = pool
        self.size = pool.n_threads
        try:
            self._cpus = os.sched_getaffinity(0)
        except AttributeError:
            self._cpus = set(range(os.cpu_count() or 1))
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.adaptive = adaptive and self.size > 1 and _cpu_jiffies(self._cpus) is not None
        self.period, self.smoothing = period, smoothing
        self.others = 0.0    # cores' worth of CPU other processes used lately (smoothed)
        self.switches = 0
        self._mark = None
        pool.active = self._want = self.size
        # overlapped decoding (engine/synthesis/overlap.py): while the decoder worker has frames, generation
        # gives it half the cores; while generation waits for it, it gets them all
        self.overlap = None
        self._generation_waits = False

    @property
    def active(self) -> int:
        return self.pool.active

    def observe(self, frame_ms: float = 0.0) -> None:
        """Called after every frame; measures the machine at most once per `period`."""
        if self.adaptive:
            self._update(self.period, self.smoothing)
        if self.overlap is not None:   # the decoder worker may have started or finished meanwhile
            self._apply()

    def restart(self) -> None:
        """Before a synthesis (and its prefill): the threads other processes have runnable right now
        (/proc/stat procs_running, less this process's own runnable threads: right after a
        synthesis its pool's workers are still spinning, and counting them as another process's
        halved the next prompt's threads) stand in until the first period has been measured."""
        if not self.adaptive:
            if self.overlap is not None:
                self._apply()
            return
        others = _others_runnable()
        if others is not None:
            self.others = float(min(len(self._cpus), others))
            self._apply()
        self._mark = (time.perf_counter(), _cpu_jiffies(self._cpus), _own_cpu_seconds())

    def _update(self, min_wall: float, smoothing: float) -> None:
        now = (time.perf_counter(), _cpu_jiffies(self._cpus), _own_cpu_seconds())
        if self._mark is None or now[1] is None:
            self._mark = now
            return
        wall = now[0] - self._mark[0]
        if wall < min_wall:
            return
        machine = (now[1][0] - self._mark[1][0]) / self._hz
        others = max(0.0, machine - (now[2] - self._mark[2])) / wall
        self._mark = now
        self.others = smoothing * self.others + (1 - smoothing) * others
        self._apply()

    def generation_waits(self, waiting: bool) -> None:
        """The generating thread waits for the overlapped decoder (or goes on): the cores go to it."""
        self._generation_waits = waiting
        self._apply()

    def _apply(self) -> None:
        want = self.size if not self.adaptive else max(1, min(self.size, int(len(self._cpus) - self.others + 0.3)))
        if want != self._want:   # (switches count the machine's changes, not the overlap's)
            self._want = want
            self.switches += 1
        if self.overlap is not None:
            beside = decoder_threads(want)
            self.overlap.pool.active = min(self.overlap.pool.n_threads, want if self._generation_waits else beside)
            if self.overlap.busy and not self._generation_waits:
                want = max(1, want - beside)
        self.pool.active = want


def _procs_running() -> int | None:
    try:
        with open("/proc/stat") as f:
            for line in f:
                if line.startswith("procs_running"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _others_runnable(samples: int = 3, spacing: float = 0.001) -> int | None:
    """Runnable threads of other processes: the least of a few readings, a millisecond apart, of
    procs_running less this process's own runnable threads (the two are read one after the other,
    spinning workers come and go between them, and a kernel thread's blip is not a busy process)."""
    least = None
    for i in range(samples):
        if i:
            time.sleep(spacing)
        running = _procs_running()
        if running is None:
            return None
        others = max(0, running - _own_runnable_threads())
        least = others if least is None else min(least, others)
        if least == 0:   # none can read lower: an idle machine costs one reading, not three
            break
    return least


def _own_runnable_threads() -> int:
    """This process's threads that are running or ready to run now (/proc/self/task/*/stat), the
    calling one included; 1 where that cannot be read."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    n = 0
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:   # the thread ended meanwhile
            continue
        if stat[stat.rfind(")") + 2:].startswith("R"):   # the state follows the command name
            n += 1
    return max(1, n)


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system
