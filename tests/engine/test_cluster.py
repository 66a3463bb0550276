"""Rendering on a Ray cluster: two "nodes" on this machine (Ray's own multi-node test harness starts
a head and a second raylet), the same files bit for bit as a local render (a script's lines, a book's
chapters), and a node removed mid-script: its lines are rendered by the other and the result is complete."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile

from kazeia.engine.script.render import read_manifest

from support.books import make_epub
from support.commands import write_script

ray = pytest.importorskip("ray", reason="the cluster extra (pip install 'kazeia[cluster]') is not installed")
pytestmark = pytest.mark.slow   # (two Ray nodes start for each test)


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


def kazeia_book(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kazeia.engine", "book", *map(str, args)], capture_output=True,
                          text=True, **kw)


def test_ray_renders_the_same_files_and_survives_a_node_loss(cluster, tmp_path):
    c, worker = cluster
    # a book: its chunks made on both nodes, every file the same bytes as a local render's
    book = make_epub(tmp_path / "b.epub", [(f"Chapter {k}", f"<h1>Chapter {k}</h1><p>Sentence one of {k}. "
                                            f"Sentence two of {k}.</p><p>A paragraph of {k}.</p>") for k in (1, 2, 3)])
    common = ("--model", "demo", "--speaker", "vivian", "--max-frames", "8", "--batch", "2", "--format", "flac", "-q")
    local = kazeia_book(book, "-o", tmp_path / "book-local", "--threads", "2", *common, timeout=600)
    assert local.returncode == 0, local.stderr
    on_ray = kazeia_book(book, "-o", tmp_path / "book-ray", "--ray", c.address, *common, timeout=900)
    assert on_ray.returncode == 0, on_ray.stderr
    files = sorted(p.name for p in (tmp_path / "book-local").iterdir() if p.is_file())
    assert {".flac", ".m4b", ".srt", ".vtt", ".json"} <= {Path(f).suffix for f in files}
    assert files == sorted(p.name for p in (tmp_path / "book-ray").iterdir() if p.is_file())
    for name in files:
        assert (tmp_path / "book-local" / name).read_bytes() == (tmp_path / "book-ray" / name).read_bytes(), name
    journal = (tmp_path / "book-ray" / ".kazeia-book" / "chunks" / "journal.jsonl").read_text().splitlines()
    assert {json.loads(line)["worker"] for line in journal} == {c.head_node.node_id, worker.node_id}
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


def _until_replicas_answer(base: str, proc, deadline: float, replicas: int) -> None:
    """Until `replicas` replicas of the server at `base` are up and answering."""
    import httpx2 as httpx
    seen: set[str] = set()
    while len(seen) < replicas:
        assert time.time() < deadline and proc.poll() is None, "the deployment did not come up"
        try:
            r = httpx.get(base + "/health", timeout=10)
            if r.status_code == 200:
                seen.add(r.headers["x-kazeia-replica"])
        except httpx.TransportError:
            pass
        time.sleep(0.2)


def test_serve_on_ray_two_replicas_and_one_killed_mid_stream(cluster, tmp_path):
    """`kazeia serve --ray ADDRESS --replicas 2`: both replicas answer; one killed while it streams:
    its client's request ends (an error or a cut stream) instead of hanging, the stream on the other
    replica ends whole, and new requests are answered by the living one."""
    import threading

    import httpx2 as httpx
    import openai

    from kazeia.engine.serve.local import free_port
    c, _ = cluster
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kazeia.engine", "serve", "--model", "demo", "--ray", c.address,
                             "--replicas", "2", "--threads", "1", "--max-batch", "1", "--max-queue", "0",
                             "--port", str(port)],
                            stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 300
        _until_replicas_answer(base, proc, deadline, 2)
        ray.init(address=c.address, log_to_driver=False)
        replicas = [a for a in ray.util.list_named_actors(all_namespaces=True) if "SERVE_REPLICA" in a["name"]]
        assert len(replicas) == 2
        outcomes: dict[str, object] = {}

        def stream(tag: str) -> None:
            body = {"model": "kazeia", "voice": "vivian", "input": "A long one.", "response_format": "pcm",
                    "max_frames": 1500}
            try:
                with httpx.stream("POST", base + "/v1/audio/speech", json=body, timeout=120) as r:
                    outcomes[tag + "_replica"] = r.headers.get("x-kazeia-replica")
                    outcomes[tag + "_status"] = r.status_code
                    outcomes[tag] = sum(len(part) for part in r.iter_bytes())
            except httpx.HTTPError as e:
                outcomes[tag] = e
            outcomes[tag + "_ended"] = time.time()
        # one request per replica at a time (--max-batch 1 --max-queue 0): the second stream goes to the
        # other replica whatever the router's load probes say
        streams = [threading.Thread(target=stream, args=(f"s{i}",)) for i in range(2)]
        for i, t in enumerate(streams):
            t.start()
            while f"s{i}_replica" not in outcomes:
                assert time.time() < deadline
                time.sleep(0.05)
        assert outcomes["s0_replica"] != outcomes["s1_replica"] and outcomes["s1_status"] == 200
        victim_tag = outcomes["s1_replica"]   # the stream just begun: still running when its replica dies
        pid = int(victim_tag.split("/")[1])
        victim = next(a for a in replicas if ray.get(ray.get_actor(a["name"], namespace=a["namespace"])
                                                     .__ray_call__.remote(lambda self: __import__("os").getpid())) == pid)
        ray.kill(ray.get_actor(victim["name"], namespace=victim["namespace"]), no_restart=False)
        killed_at = time.time()
        for t in streams:
            t.join(180)
            assert not t.is_alive(), "a stream hung"
        client = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0)
        # (both streams asked for the same audio: the tiny random model may end it before 1500 frames)
        whole = len(client.audio.speech.create(model="kazeia", voice="vivian", input="A long one.",
                                               response_format="pcm", extra_body={"max_frames": 1500}).content)
        assert isinstance(outcomes["s1"], Exception) or outcomes["s1"] < whole   # cut, never passed off as whole
        assert outcomes["s1_ended"] > killed_at
        assert outcomes["s0"] == whole and outcomes["s0_status"] == 200   # the other replica's stream, whole
        for _ in range(3):   # new requests: answered (by the living replica, or the replacement)
            assert len(client.audio.speech.create(model="kazeia", voice="vivian", input="Hi.", response_format="pcm",
                                                  extra_body={"max_frames": 2}).content) == 2 * 1920 * 2
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(60) == 0, proc.stderr.read()
        finally:
            if proc.poll() is None:
                proc.kill()
            ray.shutdown()
