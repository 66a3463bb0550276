"""`kazeia serve`: the speech server."""
from __future__ import annotations

import argparse

from .options import (DefaultsHelpFormatter, OVERLAP_HELP, thread_count)


def add_parser(sub) -> None:
    sv = sub.add_parser("serve", help="an OpenAI-compatible speech server (docs/serving.md)",
                        formatter_class=DefaultsHelpFormatter)
    sv.add_argument("--model", required=True, help='a GGUF file, or "demo" for the bundled demo model')
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (beyond loopback: needs an API key)")
    sv.add_argument("--port", type=int, default=8000)
    sv.add_argument("--wyoming", default=None, metavar="tcp://HOST:PORT",
                    help="also serve Wyoming (Home Assistant) there, e.g. tcp://127.0.0.1:10200 (it has no keys)")
    sv.add_argument("--wyoming-allow", action="append", default=None, metavar="CIDR[,CIDR]",
                    help="networks that may connect to a Wyoming port beyond loopback, e.g. 192.168.1.0/24 "
                         "(Wyoming has no keys: required there)")
    sv.add_argument("--allowed-host", action="append", default=None, metavar="NAME",
                    help="a name clients reach the server by, beyond localhost and IP addresses (a request "
                         "with another Host is refused: DNS rebinding); repeat for more")
    sv.add_argument("--cors-origin", action="append", default=None, metavar="ORIGIN",
                    help="let web pages from ORIGIN call the API and its sockets (repeat for more; default: pages on "
                         "this machine only)")
    sv.add_argument("--api-key", default=None, help="clients send Authorization: Bearer KEY (default: $KAZEIA_API_KEY)")
    sv.add_argument("--name", default=None, help="the model's name in requests (default: the file's stem)")
    sv.add_argument("--max-batch", type=int, default=4, help="requests synthesized together")
    sv.add_argument("--max-queue", type=int, default=16, help="requests waiting beyond those (more: 429)")
    sv.add_argument("--voices", default=None, help="folder of voice profiles (.kzvoice; Base models; default: the voice library)")
    sv.add_argument("--voice-map", action="append", default=None, metavar="NAME=VOICE",
                    help="what an OpenAI voice name (alloy, ...) speaks as; repeat for more")
    sv.add_argument("--lexicon", action="append", default=None, help="pronunciation rules for every request")
    sv.add_argument("--request-timeout", type=float, default=300.0, help="seconds a request (or a live socket's turn) may run")
    sv.add_argument("--idle-timeout", type=float, default=30.0,
                    help="seconds a live socket may send nothing while a turn is open before the server speaks "
                         "what it has and closes it (between turns a socket may rest)")
    sv.add_argument("--max-frames", type=int, default=None,
                    help="frames a request may make at most (12.5 a second of audio; default: the model's runaway guard)")
    feed = sv.add_mutually_exclusive_group()
    feed.add_argument("--streaming-text", dest="streaming_text", action="store_true", default=True,
                      help="feed each request's text while generating: first audio in ~0.2 s, joiners barely stall "
                           "a batch (a request may ask otherwise: its streaming_text field)")
    feed.add_argument("--no-streaming-text", dest="streaming_text", action="store_false",
                      help="the whole text in the prompt, as the reference wrapper does for CustomVoice and "
                           "VoiceDesign (prefill ~8x longer)")
    sv.add_argument("--shutdown-grace", type=float, default=10.0,
                    help="seconds running streams get to end after SIGTERM")
    sv.add_argument("--threads", type=thread_count, default=None, help="compute threads (default: every core)")
    sv.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=None, help=OVERLAP_HELP)
    sv.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                    help="serve on Ray Serve, one engine per replica: no address starts a local cluster; ADDRESS "
                         "joins one (pip install 'kazeia[cluster]')")
    sv.add_argument("--replicas", type=int, default=1, help="replicas with --ray")
    sv.set_defaults(func=run)


def run(args) -> int:
    from ..serve.run import ServeOptions, serve
    return serve(ServeOptions.from_args(args))
