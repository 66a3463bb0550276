"""What a server is told when it starts (kazeia serve's options; the workbench's Serve panel): its
model's name, key, limits, extra listeners and how prompts are built."""
from __future__ import annotations

from dataclasses import dataclass, field


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
