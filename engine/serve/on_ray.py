"""`kazeia serve --ray [ADDRESS] --replicas N`: the same app as a Ray Serve deployment, one engine per
replica (each loads the model file from the same path on its node), behind Ray Serve's proxy on
--host/--port. A replica is given at most `max_batch + max_queue` requests (Serve routes the rest to
another); beyond every replica's share Serve's router holds `max_queue` more per replica, then
answers 503. A replica that dies:
the requests in flight on it end (a 5xx from the proxy, or a stream cut short), never hang; the other
replicas keep streaming; new requests go to the living ones while Serve starts a replacement.
(Wyoming stays on a single process: `kazeia serve --wyoming`.)"""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass
class ReplicaApp:
    """What a replica builds its app from (it travels pickled)."""
    model_path: str
    settings: object            # app.ServerSettings
    threads: int | None
    voices: str | None
    voice_map: dict
    lexicons: list

    def build(self):
        from ..synthesis.engine import Engine
        from ..text.lexicon import load_lexicons
        from .app import create_app
        from .voices import VoiceBook
        if not Path(self.model_path).is_file():
            raise FileNotFoundError(f"{self.model_path}: no model file on node {socket.gethostname()} "
                                    "(every node needs the file at this path)")
        engine = Engine.load(self.model_path, threads=self.threads, max_batch=self.settings.max_batch)
        engine.warm_up()
        lexicon = load_lexicons(self.lexicons)[0] if self.lexicons else None
        app = create_app(engine, VoiceBook(engine.model, self.voices, self.voice_map), self.settings, lexicon)
        served_by = f"{socket.gethostname()}/{os.getpid()}"

        @app.middleware("http")
        async def replica_header(request, call_next):   # which replica answered (logs, tests)
            response = await call_next(request)
            response.headers["x-kazeia-replica"] = served_by
            return response
        return app


def serve_on_ray(o, model_path: Path, settings) -> int:
    """`kazeia serve --ray`: replicas on the cluster at o.ray ("local": one started here); o: run.ServeOptions."""
    try:
        import ray
        from ray import serve
    except ImportError:
        raise ValueError("--ray needs Ray Serve: pip install 'kazeia[cluster]'") from None
    if o.ray != "local":
        ray.init(address=o.ray, log_to_driver=False)
    else:
        ray.init(include_dashboard=False, log_to_driver=False)
    stop = threading.Event()   # (after ray.init, whose own SIGTERM handler would end the process at once)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    serve.start(http_options={"host": o.host, "port": o.port})
    replica = ReplicaApp(str(Path(model_path).resolve()), replace(settings, wyoming=None), o.threads,
                       str(Path(o.voices).resolve()) if o.voices else None, o.voice_map,
                       [str(Path(p).resolve()) for p in o.lexicons])

    def build_app():   # (a function: Ray Serve calls a builder function on each replica, at its start)
        return replica.build()
    deployment = serve.deployment(serve.ingress(build_app)(), name="kazeia", num_replicas=o.replicas,
                                  ray_actor_options={"num_cpus": o.threads or 1},
                                  # a replica takes what its admission would (Serve sends the rest to
                                  # another); Serve's router holds --max-queue per replica and answers
                                  # 503 beyond that
                                  max_ongoing_requests=settings.max_batch + settings.max_queue,
                                  max_queued_requests=max(1, settings.max_queue * o.replicas))   # (Serve: >= 1)
    serve.run(deployment.bind(), name="kazeia", route_prefix="/", blocking=False)
    print(f"kazeia serve: {settings.model_name} on Ray Serve, {o.replicas} replica(s), "
          f"http://{o.host}:{o.port}/v1", file=sys.stderr, flush=True)
    stop.wait()
    serve.shutdown()
    ray.shutdown()
    print("kazeia serve: stopped", file=sys.stderr)
    return 0
