"""Runtime: what a running proxy holds, made once per app and reached through app.state."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from proxy.config import Settings
from proxy.guard import Guard
from proxy.log_format import request_line
from proxy.metrics import Metrics
from proxy.offload import Offload
from proxy.recording.dumper import Dumper
from proxy.recording.recorder import Recorder
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
    guard: Guard = field(default_factory=Guard)
    offload: Offload | None = None  # worker processes for the largest bodies (proxy.offload)

    @property
    def strict(self) -> bool:
        return self.rules.strict is not None

    def wants_preset(self, *, results: bool = False) -> bool:
        """Whether anything reads the harness's preset for this request: strict mode, recording,
        and a request carrying tool results (compared with its masks); never with --no-presets."""
        return self.settings.presets and (self.strict or self.recorder is not None or results)

    def answered(
        self, api: str, session: str, lane: str, source: str, turn: str, status: int, started: float
    ) -> None:
        """What a request got, in the request log and the metrics (errors the front answers are
        counted by front.answer_error)."""
        ms = (time.perf_counter() - started) * 1000
        request_line(api, session, lane, source, turn, status, ms)
        self.metrics.answered(api, lane, source, status)
