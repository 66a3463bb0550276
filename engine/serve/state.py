"""What every endpoint of one server reads: the engine, voices, settings and lexicon it was made with,
the admission that bounds its requests, its metrics and the request log. `create_app` makes one
`ServerState` and keeps it as the app's `state`; the HTTP routes, the live sockets and the Wyoming
handler (through `live`) read it, and nothing else is shared between requests."""
from __future__ import annotations

import hmac
import logging
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .errors import ApiError
from .live import LiveService
from .metrics import Metrics
from .settings import ServerSettings
from .speech import MODEL_ALIASES

if TYPE_CHECKING:
    from ..synthesis.engine import Engine
    from .job import SpeechJob
    from .voices import VoiceBook

log = logging.getLogger("kazeia.serve")


class Admission:
    """Requests in the server (running or waiting for a batch slot), bounded."""

    def __init__(self, limit: int):
        self.limit = limit
        self.admitted = 0
        self._lock = threading.Lock()
        self._seconds: deque[float] = deque(maxlen=20)   # recent requests' durations

    def enter(self) -> bool:
        with self._lock:
            if self.admitted >= self.limit:
                return False
            self.admitted += 1
            return True

    def leave(self, seconds: float) -> None:
        with self._lock:
            self.admitted -= 1
            self._seconds.append(seconds)

    def full(self) -> ApiError:
        """The answer to a request beyond the limit: 429 with a Retry-After (the HTTP API, the live
        sockets' handshake and their turns say the same)."""
        wait = self.retry_after()
        return ApiError(429, f"the server is full ({self.limit} requests running or waiting); retry in {wait} s",
                        None, "server_busy", headers={"Retry-After": str(wait)})

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: a recent request's typical length."""
        recent = sorted(self._seconds)
        return max(1, math.ceil(recent[len(recent) // 2])) if recent else 1


@dataclass
class ServerState:
    """`observer`: called (on the server's thread) with each finished request's log record (the
    workbench's Serve panel lists them)."""
    engine: "Engine"
    voices: "VoiceBook"
    settings: ServerSettings
    lexicon: object = None   # the server's pronunciation rules (text.lexicon.Lexicon)
    observer: Callable[[dict], None] | None = None
    admission: Admission = field(init=False)
    metrics: Metrics = field(init=False)
    live: LiveService = field(init=False)   # what the live sockets' and Wyoming's turns share
    model_names: tuple[str, ...] = field(init=False)   # the settings' name, then the aliases clients hard-code
    takes_instructions: bool = field(init=False)

    def __post_init__(self) -> None:
        settings, info = self.settings, self.engine.info
        self.admission = Admission(settings.max_batch + settings.max_queue)
        self.metrics = Metrics()
        self.model_names = (settings.model_name, *MODEL_ALIASES)
        # (the reference drops a 0.6B CustomVoice model's instruction: refused, not ignored)
        self.takes_instructions = info.variant == "voice_design" or (info.variant == "custom_voice"
                                                                     and info.size != "0b6")
        self.live = LiveService(self.engine, self.admission, settings, self.finish,
                                self.metrics.requests.labels("rejected").inc, self.lexicon)

    @property
    def sample_rate(self) -> int:
        return self.engine.info.sample_rate

    def check_key(self, given: str | None) -> None:
        """ApiError 401 unless `given` is the server's API key (any key, or none, when it has none)."""
        key = self.settings.api_key
        if key is None:
            return
        if given is None or not hmac.compare_digest(given.encode(), key.encode()):
            raise ApiError(401, "missing or wrong API key: send Authorization: Bearer <key>", None, "invalid_api_key")

    def check_instructions(self, instructions: str | None) -> None:
        if instructions is not None and not self.takes_instructions:
            raise ApiError(400, f"{self.settings.model_name} takes no instructions (VoiceDesign and 1.7B CustomVoice "
                                "models do)", "instructions", "unsupported_value")

    def admit(self) -> None:
        """A slot for one request, else ApiError 429 (counted as rejected)."""
        if not self.admission.enter():
            self.live.rejected()
            raise self.admission.full()
        self.metrics.occupancy(self.admission.admitted, self.settings.max_batch)

    def check_room(self) -> None:
        """ApiError 429 (counted as rejected) while no slot is free: a live socket's handshake (its
        turns each take a slot of their own)."""
        if self.admission.admitted >= self.admission.limit:
            self.live.rejected()
            raise self.admission.full()

    def finish(self, job: "SpeechJob", rid: str, outcome: str) -> None:
        """A request's end, whatever protocol asked for it: its slot freed, its metrics, its log line."""
        seconds = time.perf_counter() - job.started
        self.admission.leave(seconds)
        metrics = self.metrics
        metrics.occupancy(self.admission.admitted, self.settings.max_batch)
        metrics.requests.labels(outcome).inc()
        if outcome == "ok":
            if job.ttfa_ms is not None:
                metrics.ttfa.observe(job.ttfa_ms / 1000)
            if job.samples:
                metrics.rtf.observe(job.rtf)
        ttfa = f"{job.ttfa_ms:.0f}" if job.ttfa_ms is not None else "-"
        rtf = f"{job.rtf:.2f}" if job.samples else "-"
        log.info("%s voice=%s chars=%d frames=%d ttfa_ms=%s rtf=%s outcome=%s", rid, job.voice.name,
                 len(job.text), job.frames, ttfa, rtf, outcome)
        if self.observer is not None:
            self.observer({"id": rid, "voice": job.voice.name, "chars": len(job.text), "frames": job.frames,
                           "ttfa_ms": job.ttfa_ms, "rtf": job.rtf if job.samples else None,
                           "stage_ms": dict(job.stage_ms), "outcome": outcome, "seconds": seconds})
