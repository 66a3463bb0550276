"""Rendering on a Ray cluster (`kazeia render --ray [ADDRESS]`, `kazeia book --ray [ADDRESS]`; pip install
'kazeia[cluster]').

One Ray actor per node loads the engine once and makes a script's lines, or a book's chunks, in
batches (the batched engine, as locally); the driver (engine/script/render.py, engine/book/render.py) hands
out the work, collects results as they complete and writes the files, the manifest or the chunk store
itself, so resume works exactly as locally. When an actor or its whole node dies, the driver gives its
unfinished work to the actors that remain (it is deterministic: the same request gives the same audio
on any node). Actors rather than Ray Data's
map_batches over an actor pool, by measurement (docs/scripts.md: 58.6 s against 63.5 s for the same script);
results also reach the driver line by line as they finish (for the manifest and resume)."""
from __future__ import annotations

import os
import tempfile
from collections import deque
from pathlib import Path
from typing import Callable, Iterator

from .render import LineJob, LineOutcome

# where an actor or its node is gone (its work goes to the actors that remain)
def _lost(ray) -> tuple:
    return (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
            ray.exceptions.ObjectLostError)


def _ray():
    try:
        import ray
    except ImportError:
        raise ValueError("--ray needs Ray: pip install 'kazeia[cluster]' (or pip install ray)") from None
    return ray


class RenderWorker:
    """Lives on one node: the engine loaded once, lines rendered `batch` at a time."""

    def __init__(self, model_path: str, threads: int | None, batch: int, placement: str = "cpu"):
        from ..synthesis.engine import Engine
        if not Path(model_path).is_file():
            raise FileNotFoundError(f"{model_path}: no model file on node {os.uname().nodename} "
                                    "(give every node the file at this path, or --node-model)")
        self.engine = Engine.load(model_path, threads=threads, placement=placement)
        self.batch = batch

    def node(self) -> str:
        return os.uname().nodename

    def render(self, payloads: list[dict]) -> list[dict]:
        from .render import LocalExecutor
        from .lines import ScriptLine
        results, jobs = [], []
        with tempfile.TemporaryDirectory() as folder:
            for p in payloads:   # voice profiles travel with the lines: no shared file system needed
                line = ScriptLine(**p["line"])
                if p.get("voice_bytes") is not None:
                    line.voice = f"voice-{line.id}.kzvoice"
                    (Path(folder) / line.voice).write_bytes(p["voice_bytes"])
                jobs.append(LineJob(line, p["request"], p["hash"], Path(p["path"])))
            import ray
            node = ray.get_runtime_context().get_node_id()
            for job, outcome in LocalExecutor(self.engine, self.batch).run(jobs, Path(folder)):
                outcome.worker = node
                results.append({"id": job.line.id, "outcome": outcome.__dict__})
        return results

    def chunks(self, payloads: list[dict]) -> list[dict]:
        """A book's chunks (engine/long_take/chunks.py), each made alone with its seed on this node's batcher."""
        import ray

        from ..long_take.chunks import ChunkJob, synthesize_chunks
        node = ray.get_runtime_context().get_node_id()
        jobs = [ChunkJob(p["request"], p["hash"], p["id"]) for p in payloads]
        return [{"id": c.job.tag, "audio": c.audio, "codes": c.codes, "stop_reason": c.stop_reason,
                 "seconds": c.seconds, "worker": node} for c in synthesize_chunks(self.engine, jobs, self.batch)]


class RayExecutor:
    """The render driver's executor on Ray: `address` None starts a local Ray runtime."""

    def __init__(self, model_path: str | os.PathLike, address: str | None = None, batch: int = 4,
                 threads: int | None = None, node_model: str | None = None, workers: int | None = None,
                 placement: str = "cpu"):
        ray = _ray()
        self.ray = ray
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(include_dashboard=False, log_to_driver=False)
        self.batch = batch
        nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("CPU", 0) >= 1]
        if not nodes:
            raise ValueError("the Ray cluster has no node with a CPU")
        model = str(node_model or Path(model_path).resolve())
        # no restarts: a restarted actor could wait forever for CPUs the other nodes' actors hold; the
        # driver gives a dead actor's lines to the others instead
        actor = ray.remote(max_restarts=0, max_task_retries=0)(RenderWorker)
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        self.actors = []
        for n in nodes[:workers] if workers else nodes:
            cpus = int(n["Resources"]["CPU"])
            self.actors.append(actor.options(
                num_cpus=cpus, scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=True)
            ).remote(model, threads or cpus, batch, placement))
        self.nodes = len(self.actors)

    def run(self, jobs: list[LineJob], folder: Path, stop: Callable[[], bool] = lambda: False
            ) -> Iterator[tuple[LineJob, LineOutcome]]:
        """A script's lines (engine/script/render.py's executor)."""
        def payload(_, job: LineJob) -> dict:
            line = dict(job.line.__dict__)
            voice = (folder / job.line.voice).read_bytes() if job.line.voice else None
            return {"line": line, "request": job.request, "hash": job.hash, "path": str(job.path), "voice_bytes": voice}

        for job, r, error in self._spread({j.line.id: j for j in jobs}, payload, "render", stop):
            yield job, LineOutcome(error=error) if error else LineOutcome(**r["outcome"])

    def make_chunks(self, jobs: list, stop: Callable[[], bool] = lambda: False) -> Iterator:
        """A book's chunks (engine/book/chunks.make_chunks' executor), MadeChunk by MadeChunk as batches
        end. A chunk that fails raises, as it does locally."""
        from ..long_take.chunks import MadeChunk
        # (numbered, not named by hash: two chunks may ask for the same audio)
        for job, r, error in self._spread(dict(enumerate(jobs)), lambda i, j: {"id": i, "request": j.request, "hash": j.hash},
                                          "chunks", stop):
            if error:
                raise RuntimeError(f"a chunk failed on the Ray cluster: {error}")
            yield MadeChunk(job, r["audio"], r["codes"], r["stop_reason"], r["seconds"], r["worker"])

    def _spread(self, by_id: dict, payload: Callable, method: str, stop: Callable[[], bool]):
        """Hands the work out `batch` at a time (`payload(id, work)` what travels; results name their
        id), two calls per actor (one runs while the next waits);
        yields (work, the actor's result dict, None) as calls end, or (work, None, why) when the work
        failed or every actor is gone."""
        ray = self.ray
        queue = deque(by_id)        # ids
        in_flight: dict = {}        # object ref -> (actor, [ids])
        live = list(self.actors)

        def feed(actor) -> None:
            ids = []
            while queue and len(ids) < self.batch:
                ids.append(queue.popleft())
            if ids:
                call = getattr(actor, method).remote([payload(i, by_id[i]) for i in ids])
                in_flight[call] = (actor, ids)

        for actor in live:
            feed(actor)
            feed(actor)
        while in_flight:
            if stop():
                for ref in in_flight:
                    ray.cancel(ref, force=True)
                return
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
            for ref in done:
                actor, ids = in_flight.pop(ref)
                try:
                    results = ray.get(ref)
                except _lost(ray) as e:
                    # the node is gone: its work goes to the actors that remain (Ray retried already)
                    if actor in live:
                        live.remove(actor)
                    if not live:
                        for i in ids:
                            yield by_id[i], None, f"every Ray worker failed: {e}"
                        continue
                    queue.extendleft(reversed(ids))
                    for other in live:
                        if not any(a is other for a, _ in in_flight.values()):
                            feed(other)
                    continue
                except ray.exceptions.RayTaskError as e:
                    for i in ids:
                        yield by_id[i], None, str(e).strip().splitlines()[-1]
                    feed(actor)
                    continue
                for r in results:
                    yield by_id[r["id"]], r, None
                feed(actor)

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a)
