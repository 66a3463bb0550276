"""`kazeia serve`: listen at once (503 while the model loads and warms up on a worker thread), then
serve it with uvicorn until SIGTERM or Ctrl-C (then no new connections; running streams get
`--shutdown-grace` seconds to end, then are cancelled; exit 0). Listening beyond this machine needs an API key: a speech server open to a network without
one is what peers ship and their users regret."""
from __future__ import annotations

import ipaddress
import logging
import os
import signal
import sys
import time

log = logging.getLogger("kazeia.serve")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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


def serve(args) -> int:
    import uvicorn

    from ..demo import resolve_model
    from ..model_file import ModelFile
    from ..synthesis import Engine
    from .app import ServerSettings, create_app
    from .gate import LoadingGate
    from .local import check_can_listen
    from .voices import VoiceBook
    key = args.api_key or os.environ.get("KAZEIA_API_KEY") or None
    if not is_loopback(args.host) and key is None:
        raise ValueError(f"--host {args.host} listens beyond this machine: give an API key (--api-key or "
                         "$KAZEIA_API_KEY), or keep the default 127.0.0.1")
    if args.max_frames is not None and args.max_frames < 1:
        raise ValueError("--max-frames must be at least 1")
    for name in ("max_batch", "max_queue"):
        if getattr(args, name) < (1 if name == "max_batch" else 0):
            raise ValueError(f"--{name.replace('_', '-')} must be at least {1 if name == 'max_batch' else 0}")
    wyoming = parse_wyoming(args.wyoming)
    started = time.perf_counter()
    check_can_listen(args.host, args.port)   # a clear message, not a traceback
    model = ModelFile(resolve_model(args.model))   # a bad file: a message now, before anything listens
    lexicon = None
    if args.lexicon:
        from ..text.lexicon import load_lexicons
        lexicon = load_lexicons(args.lexicon)[0]
    voice_map = parse_voice_map(args.voice_map)
    voices = VoiceBook(model, args.voices, voice_map)   # (checked here, whichever process serves)
    name = args.name or model.info.path.stem
    settings = ServerSettings(name, key, args.max_batch, args.max_queue, args.request_timeout,
                              wyoming=wyoming, cors_origins=args.cors_origin or [], max_frames=args.max_frames,
                              streaming_text=args.streaming_text)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    if args.ray is not None:
        if wyoming:
            raise ValueError("--wyoming serves from one process: give it without --ray")
        from .on_ray import serve_on_ray
        return serve_on_ray(args, None if args.ray == "local" else args.ray, model.info.path, settings, voice_map)

    def load():   # (on a worker thread while the server answers 503)
        engine = Engine(model, threads=args.threads, max_batch=args.max_batch, overlap=args.overlap)
        engine.warm_up()
        log.info("ready: %s (%s, %s) in %.1f s", name, model.info.variant, model.info.size_label,
                 time.perf_counter() - started)
        return create_app(engine, voices, settings, lexicon)

    failed: list[BaseException] = []

    def on_failure(e: BaseException) -> None:
        failed.append(e)
        log.error("the model failed to load: %s", e)
        server.should_exit = True
    print(f"kazeia serve: {name} on http://{args.host}:{args.port} (503 until the model is loaded); "
          f"POST /v1/audio/speech, GET /v1/audio/voices, /metrics"
          f"{'' if key else ' (no API key: loopback only)'}"
          f"{f'; Wyoming on {args.wyoming}' if wyoming else ''}",
          file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(LoadingGate(load, on_failure), host=args.host, port=args.port,
                                           log_level="warning", timeout_graceful_shutdown=args.shutdown_grace))
    # uvicorn stops gracefully on SIGTERM, then raises it again to the handler it found: a quiet one,
    # so a stop asked for is exit 0
    signal.signal(signal.SIGTERM, lambda *_: None)
    server.run()
    print("kazeia serve: stopped", file=sys.stderr)
    return 1 if failed else 0
