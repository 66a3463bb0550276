"""A server of an app in a thread of this process (the bench, the tests, the workbench's Serve panel):
on a free loopback port unless told, stopped on exit."""
from __future__ import annotations

import socket
import threading
import time

# a WebSocket message the server closes the socket on (1009) before reading it whole; below it, a
# message over ServerSettings.max_message_bytes is answered with an error and the socket goes on
WS_MAX_SIZE = 1 << 20
# connections and requests open at once (beyond it uvicorn answers 503): the admission limit bounds
# the work, this bounds the sockets a flood of idle clients could hold
MAX_CONNECTIONS = 256


def server_config(app, host: str, port: int, **options):
    """uvicorn's configuration with Kazeia's bounds (message size, connections)."""
    import uvicorn
    return uvicorn.Config(app, host=host, port=port, log_level="warning", ws_max_size=WS_MAX_SIZE,
                          limit_concurrency=MAX_CONNECTIONS, **options)


def check_can_listen(host: str, port: int) -> None:
    """ValueError saying why `host:port` cannot be listened on (in use, no such address), before the
    server tries and fails on a thread of its own."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as e:
            raise ValueError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    def __init__(self, app, port: int | None = None, start_timeout_s: float = 30.0, host: str = "127.0.0.1"):
        import uvicorn
        self.port = port or free_port()
        check_can_listen(host, self.port)
        self.url = f"http://{host}:{self.port}"
        self.server = uvicorn.Server(server_config(app, host, self.port))
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
