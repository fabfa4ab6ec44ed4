"""Prometheus metrics at /metrics: what was answered and how, upstream latency, active sessions.

With --workers N, every worker writes its numbers to files in PROMETHEUS_MULTIPROC_DIR (set by the
CLI), and whichever worker is scraped reports the sum; active sessions come from the shared store.
"""

from __future__ import annotations

import os
import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from proxy.store import Store

ACTIVE_WINDOW = 15 * 60  # a session with a request in the last 15 minutes is active
LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Metrics:
    """One per app (no module-level state): tests run several apps in one process."""

    def __init__(self) -> None:
        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "replay_proxy_requests",
            "Requests answered, by API, lane, source (scripted, upstream, recorded, stop, error) and status",
            ["api", "lane", "source", "status"],
            registry=r,
        )
        self.divergences = Counter(
            "replay_proxy_divergences",
            "Requests whose history, request or tool result differed from the script, by kind",
            ["kind"],
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "replay_proxy_upstream_seconds",
            "Upstream time to the last byte",
            ["api"],
            buckets=LATENCY,
            registry=r,
        )
        self.upstream_ttfb = Histogram(
            "replay_proxy_upstream_ttfb_seconds",
            "Upstream time to the first byte",
            ["api"],
            buckets=LATENCY,
            registry=r,
        )
        self.active = Gauge(
            "replay_proxy_active_sessions",
            f"Sessions with a request in the last {ACTIVE_WINDOW // 60} minutes",
            registry=r,
            multiprocess_mode="mostrecent",
        )

        # labelled children, looked up once: labels() costs more than the count itself
        self._answered: dict[tuple[str, str, str, int], Any] = {}
        self._timings: dict[str, tuple[Any, Any]] = {}

    def answered(self, api: str, lane: str, source: str, status: int) -> None:
        key = (api, lane, source, status)
        child = self._answered.get(key)
        if child is None:
            child = self._answered[key] = self.requests.labels(api, lane, source, str(status))
        child.inc()

    def upstream(self, api: str, started: float, first_byte: float | None, finished: float) -> None:
        children = self._timings.get(api)
        if children is None:
            children = self._timings[api] = (
                self.upstream_seconds.labels(api),
                self.upstream_ttfb.labels(api),
            )
        children[0].observe(finished - started)
        if first_byte is not None:
            children[1].observe(first_byte - started)

    async def exposition(self, store: Store) -> bytes:
        cutoff = time.time() - ACTIVE_WINDOW
        self.active.set(sum(1 for s in await store.sessions() if s.last_seen >= cutoff))
        if self.multiprocess:
            registry = CollectorRegistry()
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest(self.registry)
