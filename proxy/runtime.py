"""Runtime: what a running proxy holds, made once per app and reached through app.state. It holds;
it decides nothing (serving/ decides what a request gets, http/ does the I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.config import Settings
from proxy.guard import Guard
from proxy.metrics import Metrics
from proxy.offload import Offload
from proxy.recording.dumper import Dumper
from proxy.recording.recorder import Recorder
from proxy.recording.tracer import Tracer
from proxy.replay.engine import Rules
from proxy.sessions.library import Library
from proxy.sessions.registry import Sessions
from proxy.store import Store
from proxy.upstream import Upstream


@dataclass(slots=True)
class Runtime:
    settings: Settings
    store: Store
    library: Library
    sessions: Sessions
    upstream: Upstream
    rules: Rules
    metrics: Metrics
    recorder: Recorder | None = None
    dumper: Dumper | None = None
    tracer: Tracer | None = None  # OpenTelemetry spans, when the OTEL_* variables ask for them
    guard: Guard = field(default_factory=Guard)
    offload: Offload | None = None  # worker processes for the largest bodies (proxy.offload)

    @property
    def strict(self) -> bool:
        return self.rules.strict is not None
