"""A server of an app on a loopback port, in a thread of this process (the bench, the tests): started
on a free port, stopped on exit."""
from __future__ import annotations

import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    def __init__(self, app, port: int | None = None, start_timeout_s: float = 30.0):
        import uvicorn
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="kazeia-local-server")
        self.thread.start()
        deadline = time.perf_counter() + start_timeout_s
        while not self.server.started:
            if time.perf_counter() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)

    def __enter__(self) -> "LocalServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
