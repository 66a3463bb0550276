"""What `GET /metrics` tells Prometheus: requests by outcome, the queue, the sessions running, and
time to first audio and real-time factor as histograms. A registry of the app's own (several apps in
one process, as in tests, keep their counts apart)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self):
        self.registry = CollectorRegistry()
        self.requests = Counter("kazeia_requests", "Speech requests by outcome", ["outcome"], registry=self.registry)
        self.queue_depth = Gauge("kazeia_queue_depth", "Requests admitted and waiting for a batch slot",
                                 registry=self.registry)
        self.active = Gauge("kazeia_active_sessions", "Requests being synthesized", registry=self.registry)
        self.ttfa = Histogram("kazeia_ttfa_seconds", "Time to first audio",
                              buckets=(0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30), registry=self.registry)
        self.rtf = Histogram("kazeia_rtf", "Real-time factor (compute seconds per audio second)",
                             buckets=(0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 5, 10), registry=self.registry)

    def occupancy(self, admitted: int, max_batch: int) -> None:
        self.active.set(min(admitted, max_batch))
        self.queue_depth.set(max(0, admitted - max_batch))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
