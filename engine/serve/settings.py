"""What a server is told when it starts (kazeia serve's options; the workbench's Serve panel): its
model's name, key, limits, extra listeners and how prompts are built."""
from __future__ import annotations

from dataclasses import dataclass, field

# one socket message or Wyoming event's JSON: 4096 characters of text, each up to 6 bytes escaped
MAX_MESSAGE_BYTES = 64 * 1024


@dataclass
class ServerSettings:
    model_name: str
    api_key: str | None = None
    max_batch: int = 4
    max_queue: int = 16
    request_timeout_s: float = 300.0
    idle_timeout_s: float = 30.0   # a live turn left open with no text and no audio going out that long ends
    max_body_bytes: int = 1 << 20
    wyoming: tuple[str, int] | None = None   # (host, port) of a Wyoming server beside the HTTP one
    cors_origins: list[str] = field(default_factory=list)   # web pages that may call the API (none: CORS off)
    max_frames: int | None = None   # every request's frames at most (a server's cap on top of the runaway guard)
    # text fed while generating (the model's dual-track streaming: a prompt of ~10 rows, so a request's
    # prefill is ~50 ms, not ~400 ms for a sentence, and joiners barely stall a batch); False: the
    # whole text in the prompt (the reference wrapper's default for CustomVoice and VoiceDesign)
    streaming_text: bool = True
    # the edge (boundary.py, docs/security.md): the address listened on, more names a Host may give
    # (--allowed-host), peers a Wyoming port beyond loopback takes (--wyoming-allow: CIDRs)
    listen_host: str = "127.0.0.1"
    allowed_hosts: list[str] = field(default_factory=list)
    wyoming_allow: list[str] = field(default_factory=list)
    # what a client may make the server wait for or hold: a send it does not read, a message or
    # event arriving whole (a Wyoming connection silent that long is closed), a message's size, a
    # live turn's whole text
    send_timeout_s: float = 30.0
    read_timeout_s: float = 30.0
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_turn_chars: int = 16_384
