"""`kazeia serve`: listen at once (503 while the model loads and warms up on a worker thread), then
serve it with uvicorn until SIGTERM or Ctrl-C (then no new connections; running streams get
`--shutdown-grace` seconds to end, then are cancelled; exit 0). Listening beyond this machine needs an
API key (a speech server open to a network without one is what peers ship and their users regret),
and a Wyoming port beyond it the networks that may connect (its protocol has no keys)."""
from __future__ import annotations

import ipaddress
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, field

log = logging.getLogger("kazeia.serve")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_networks(items: list[str] | None) -> tuple[str, ...]:
    """--wyoming-allow CIDR[,CIDR] (repeatable) -> the networks, each checked."""
    networks = []
    for item in items or []:
        for cidr in filter(None, (c.strip() for c in item.split(","))):
            try:
                networks.append(str(ipaddress.ip_network(cidr, strict=False)))
            except ValueError:
                raise ValueError(f"--wyoming-allow {cidr!r}: give a network such as 192.168.1.0/24 or an address "
                                 "such as 192.168.1.20") from None
    return tuple(networks)


def check_listeners(host: str, key: str | None, wyoming: tuple[str, int] | None,
                    wyoming_allow: tuple[str, ...]) -> None:
    """ValueError for a listener open beyond this machine without a guard: HTTP and its sockets need
    an API key; Wyoming, whose protocol carries no key, needs the networks that may connect."""
    if not is_loopback(host) and key is None:
        raise ValueError(f"--host {host} listens beyond this machine: give an API key (--api-key or "
                         "$KAZEIA_API_KEY), or keep the default 127.0.0.1")
    if wyoming is not None and not is_loopback(wyoming[0]) and not wyoming_allow:
        raise ValueError(f"--wyoming tcp://{wyoming[0]}:{wyoming[1]} listens beyond this machine, and Wyoming has "
                         "no keys: name who may connect with --wyoming-allow CIDR (e.g. 192.168.1.0/24, or your "
                         "Home Assistant's address), or listen on tcp://127.0.0.1")


def parse_voice_map(items: list[str] | None) -> dict[str, str]:
    mapping = {}
    for item in items or []:
        alias, sep, target = item.partition("=")
        if not sep or not alias.strip():
            raise ValueError(f"--voice-map {item!r}: give NAME=VOICE (a speaker, a voice profile, or on a "
                             "VoiceDesign model an instruction)")
        mapping[alias.strip()] = target.strip()
    return mapping


def parse_wyoming(uri: str | None) -> tuple[str, int] | None:
    """tcp://HOST:PORT -> (host, port)."""
    if uri is None:
        return None
    from urllib.parse import urlsplit
    parts = urlsplit(uri)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "tcp" or not parts.hostname or port is None:
        raise ValueError(f"--wyoming {uri}: give tcp://HOST:PORT (Home Assistant's usual: tcp://0.0.0.0:10200)")
    return parts.hostname, port


@dataclass(frozen=True)
class ServeOptions:
    """`kazeia serve`'s settings, typed and checked once where the command line ends (nothing after
    reads or rewrites argparse's namespace)."""
    model: str
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None            # (--api-key, else $KAZEIA_API_KEY)
    wyoming: tuple[str, int] | None = None
    cors_origins: tuple[str, ...] = ()
    name: str | None = None
    max_batch: int = 4
    max_queue: int = 16
    voices: str | None = None
    voice_map: dict[str, str] = field(default_factory=dict)
    lexicons: tuple[str, ...] = ()
    request_timeout: float = 300.0
    idle_timeout: float = 30.0
    max_frames: int | None = None
    streaming_text: bool = True
    shutdown_grace: float = 10.0
    threads: int | None = None
    overlap: bool | None = None
    ray: str | None = None                # None: no Ray; "local": a cluster started here; else its address
    replicas: int = 1
    allowed_hosts: tuple[str, ...] = ()   # more names a request's Host may give (--allowed-host)
    wyoming_allow: tuple[str, ...] = ()   # networks a Wyoming port beyond loopback takes (--wyoming-allow)

    @classmethod
    def from_args(cls, args) -> "ServeOptions":
        key = args.api_key or os.environ.get("KAZEIA_API_KEY") or None
        wyoming = parse_wyoming(args.wyoming)
        wyoming_allow = parse_networks(getattr(args, "wyoming_allow", None))
        check_listeners(args.host, key, wyoming, wyoming_allow)
        if args.idle_timeout <= 0:
            raise ValueError("--idle-timeout must be more than 0 seconds")
        if args.max_frames is not None and args.max_frames < 1:
            raise ValueError("--max-frames must be at least 1")
        if args.max_batch < 1:
            raise ValueError("--max-batch must be at least 1")
        if args.max_queue < 0:
            raise ValueError("--max-queue must be at least 0")
        if args.replicas < 1:
            raise ValueError("--replicas must be at least 1")
        if wyoming and args.ray is not None:
            raise ValueError("--wyoming serves from one process: give it without --ray")
        return cls(args.model, args.host, args.port, key, wyoming, tuple(args.cors_origin or ()), args.name,
                   args.max_batch, args.max_queue, args.voices, parse_voice_map(args.voice_map),
                   tuple(args.lexicon or ()), args.request_timeout, args.idle_timeout, args.max_frames, args.streaming_text,
                   args.shutdown_grace, args.threads, args.overlap, args.ray, args.replicas,
                   tuple(getattr(args, "allowed_host", None) or ()), wyoming_allow)


def serve(o: ServeOptions) -> int:
    import uvicorn

    from ..model_files.demo import resolve_model
    from ..model_files.model_file import ModelFile
    from ..synthesis.engine import Engine
    from .app import ServerSettings, create_app
    from .gate import LoadingGate
    from .local import check_can_listen, server_config
    from .voices import VoiceBook
    key, wyoming = o.api_key, o.wyoming
    started = time.perf_counter()
    check_can_listen(o.host, o.port)   # a clear message, not a traceback
    model = ModelFile(resolve_model(o.model))   # a bad file: a message now, before anything listens
    lexicon = None
    if o.lexicons:
        from ..text.lexicon import load_lexicons
        lexicon = load_lexicons(list(o.lexicons))[0]
    voices = VoiceBook(model, o.voices, o.voice_map)   # (checked here, whichever process serves)
    for why in voices.skipped:
        print(f"kazeia serve: voice left out: {why}", file=sys.stderr)
    name = o.name or model.info.path.stem
    settings = ServerSettings(name, key, o.max_batch, o.max_queue, o.request_timeout, o.idle_timeout,
                              wyoming=wyoming, cors_origins=list(o.cors_origins), max_frames=o.max_frames,
                              streaming_text=o.streaming_text, listen_host=o.host,
                              allowed_hosts=list(o.allowed_hosts), wyoming_allow=list(o.wyoming_allow))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    if o.ray is not None:
        from .on_ray import serve_on_ray
        return serve_on_ray(o, model.info.path, settings)

    def load():   # (on a worker thread while the server answers 503)
        engine = Engine(model, threads=o.threads, max_batch=o.max_batch, overlap=o.overlap)
        engine.warm_up()
        log.info("ready: %s (%s, %s) in %.1f s", name, model.info.variant, model.info.size_label,
                 time.perf_counter() - started)
        return create_app(engine, voices, settings, lexicon)

    failed: list[BaseException] = []

    def on_failure(e: BaseException) -> None:
        failed.append(e)
        log.error("the model failed to load: %s", e)
        server.should_exit = True
    print(f"kazeia serve: {name} on http://{o.host}:{o.port} (503 until the model is loaded); "
          f"POST /v1/audio/speech, GET /v1/audio/voices, /metrics"
          f"{'' if key else ' (no API key: loopback only)'}"
          f"{f'; Wyoming on tcp://{wyoming[0]}:{wyoming[1]}' if wyoming else ''}",
          file=sys.stderr, flush=True)
    server = uvicorn.Server(server_config(LoadingGate(load, on_failure), o.host, o.port,
                                          timeout_graceful_shutdown=o.shutdown_grace))
    # uvicorn stops gracefully on SIGTERM, then raises it again to the handler it found: a quiet one,
    # so a stop asked for is exit 0
    signal.signal(signal.SIGTERM, lambda *_: None)
    server.run()
    print("kazeia serve: stopped", file=sys.stderr)
    return 1 if failed else 0
