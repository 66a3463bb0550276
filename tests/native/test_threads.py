"""Thread counts and the thread policy: errors for impossible counts, and fewer launch threads
while other processes hold cores (decided from /proc/stat, faked here)."""
from __future__ import annotations

import os

import pytest

from kazeia.engine.synthesis import threads
from kazeia.engine.synthesis.threads import ThreadPolicy, available_cores, check_threads


pytestmark = pytest.mark.levels   # (numbers compared across paths: run again at every lower CPU level)


class FakePool:
    def __init__(self, n):
        self.n_threads, self.active = n, n


class FakeMachine:
    """/proc/stat of two cores and this process's CPU time, advanced by hand."""

    def __init__(self, monkeypatch):
        self.t = 0.0
        self.busy = 0       # jiffies of the two cores, all processes
        self.own = 0.0      # this process's CPU seconds
        self.running = 1
        monkeypatch.setattr(threads.time, "perf_counter", lambda: self.t)
        monkeypatch.setattr(threads, "_cpu_jiffies", lambda cpus: (self.busy, 0))
        monkeypatch.setattr(threads, "_own_cpu_seconds", lambda: self.own)
        monkeypatch.setattr(threads, "_procs_running", lambda: self.running)
        self.own_running = 1
        monkeypatch.setattr(threads, "_own_runnable_threads", lambda: self.own_running)

    def advance(self, seconds, own_cores, other_cores):
        self.t += seconds
        self.own += seconds * own_cores
        self.busy += round(100 * seconds * (own_cores + other_cores))


def policy_on_two_cores(monkeypatch):
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(threads.os, "sysconf", lambda name: 100)
    return ThreadPolicy(FakePool(2))


def test_thread_counts_are_checked():
    assert check_threads(1) == 1
    for bad in (0, -1, available_cores() + 1, 1.5, True):
        with pytest.raises(ValueError, match="threads"):
            check_threads(bad)


def test_policy_leaves_a_core_to_a_busy_process_and_takes_it_back(monkeypatch):
    machine = FakeMachine(monkeypatch)
    policy = policy_on_two_cores(monkeypatch)
    assert policy.adaptive and policy.active == 2
    policy.restart()
    for _ in range(8):   # idle: our two threads alone
        machine.advance(0.1, own_cores=2, other_cores=0)
        policy.observe()
    assert policy.active == 2
    for _ in range(8):   # another process takes a core: we get one core's worth
        machine.advance(0.1, own_cores=1, other_cores=1)
        policy.observe()
    assert policy.active == 1 and policy.others > 0.7
    for _ in range(8):   # it ends
        machine.advance(0.1, own_cores=1, other_cores=0)
        policy.observe()
    assert policy.active == 2


def test_policy_starts_a_request_from_what_runs_now(monkeypatch):
    machine = FakeMachine(monkeypatch)
    policy = policy_on_two_cores(monkeypatch)
    machine.running = 2   # one other runnable thread besides ours
    policy.restart()
    assert policy.active == 1   # the prefill already runs on the free core
    machine.running = 1
    policy.restart()
    assert policy.active == 2
    # right after a synthesis the pool's own workers still spin: runnable, but not another process's
    machine.running, machine.own_running = 3, 3
    policy.restart()
    assert policy.active == 2
    machine.running = 4   # and one thread of another process besides them
    policy.restart()
    assert policy.active == 1
    # readings: the least of three a millisecond apart, or one where it already reads no other
    readings = []
    monkeypatch.setattr(threads, "_procs_running", lambda: readings.append(1) or machine.running)
    policy.restart()
    assert len(readings) == 3
    readings.clear()
    machine.running = 3
    policy.restart()
    assert len(readings) == 1 and policy.active == 2


def test_this_process_counts_its_own_runnable_threads():
    """The real count, from /proc: two busy threads of this process (numpy releases the GIL) are seen
    as its own, so they never stand in for another process."""
    import threading
    import numpy as np
    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc")
    stop = threading.Event()

    def spin():
        a = np.ones((192, 192), np.float32)
        while not stop.is_set():
            a @ a

    workers = [threading.Thread(target=spin) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        seen = max(threads._own_runnable_threads() for _ in range(200))
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert seen >= 2
    assert 1 <= threads._own_runnable_threads() <= len(os.listdir("/proc/self/task"))


def test_a_fixed_policy_never_changes_the_pool(monkeypatch):
    machine = FakeMachine(monkeypatch)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    policy = ThreadPolicy(FakePool(2), adaptive=False)
    machine.running = 3
    policy.restart()
    machine.advance(1.0, own_cores=1, other_cores=1)
    policy.observe()
    assert policy.active == 2 and policy.switches == 0
