"""Rendering on a Ray cluster: two "nodes" on this machine (Ray's own multi-node test harness starts
a head and a second raylet), the same files bit for bit as a local render, and a node removed
mid-script: its lines are rendered by the other and the result is complete."""
from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import soundfile

from kazeia.engine.render import read_manifest

from test_render import write_script

ray = pytest.importorskip("ray", reason="the cluster extra (pip install 'kazeia[cluster]') is not installed")


@pytest.fixture()
def cluster():
    from ray.cluster_utils import Cluster
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": 150 * 2 ** 20,
                                                      "include_dashboard": False})
    worker = c.add_node(num_cpus=2, object_store_memory=150 * 2 ** 20)
    c.wait_for_nodes()
    yield c, worker
    c.shutdown()


def render(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "kazeia.engine", "render", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def same_files(a, b):
    names = sorted(p.name for p in a.glob("*.wav"))
    assert names == sorted(p.name for p in b.glob("*.wav")) and names
    for n in names:
        x, _ = soundfile.read(a / n, dtype="float32")
        y, _ = soundfile.read(b / n, dtype="float32")
        assert np.array_equal(x, y), n


def test_ray_renders_the_same_files_and_survives_a_node_loss(cluster, tmp_path):
    c, worker = cluster
    script = write_script(tmp_path / "script.csv", frames=lambda i: 12 + i % 7)
    local = render(script, "--model", "demo", "-o", tmp_path / "local", "--batch", "4", "--threads", "2", "-q")
    out, err = local.communicate(timeout=600)
    assert local.returncode == 0, err
    # the whole script on the cluster
    p = render(script, "--model", "demo", "-o", tmp_path / "ray", "--batch", "4", "--ray", c.address, "-q")
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err
    assert "40 rendered" in out
    same_files(tmp_path / "local", tmp_path / "ray")
    workers = {e["worker"] for e in read_manifest(tmp_path / "ray").values()}
    assert workers == {c.head_node.node_id, worker.node_id}   # both nodes rendered lines
    # again, and the second node goes away in the middle
    p = render(script, "--model", "demo", "-o", tmp_path / "lost", "--batch", "2", "--ray", c.address, "-q")
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        m = read_manifest(tmp_path / "lost") if (tmp_path / "lost").exists() else {}
        done = [e for e in m.values() if e.get("status") == "done"]
        # (the node leaves only once it has finished a line: before, a fast head could take the
        # first lines alone and the node's share be empty by chance)
        if len(done) >= 4 and any(e.get("worker") == worker.node_id for e in done):
            break
        time.sleep(0.05)
    c.remove_node(worker)
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, err
    m = read_manifest(tmp_path / "lost")
    assert len(m) == 40 and all(e["status"] == "done" for e in m.values())
    by = [e["worker"] for e in sorted(m.values(), key=lambda e: e["line"])]
    assert worker.node_id in by and by.count(c.head_node.node_id) > by.count(worker.node_id)
    same_files(tmp_path / "local", tmp_path / "lost")
