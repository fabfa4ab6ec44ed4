"""Prometheus metrics at /metrics: what was answered and how, upstream latency, active sessions.

Every request counts, so counting is plain integers, turned into Prometheus families only when
/metrics is scraped: prometheus_client's metric objects cost about 20k instructions a request
(a lock and checks per increment), 8% of a forwarded request's CPU. With --workers N the CLI sets
PROMETHEUS_MULTIPROC_DIR and each worker also writes its counts through to prometheus_client's
files there, so whichever worker is scraped reports the sum of all. Active sessions come from the
store at scrape time (shared between workers).
"""

from __future__ import annotations

import os
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.multiprocess import MultiProcessCollector

from proxy.store import Store

ACTIVE_WINDOW = 15 * 60  # a session with a request in the last 15 minutes is active
LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
_BOUNDS = (*(repr(float(b)) for b in LATENCY), "+Inf")  # as prometheus_client writes them

REQUESTS = (
    "replay_proxy_requests",
    "Requests answered, by API, lane, source (scripted, upstream, recorded, stop, error) and status",
)
DIVERGENCES = (
    "replay_proxy_divergences",
    "Requests whose history, request or tool result differed from the script, by kind and "
    "verdict (volatile: only values that change between runs differ; changed: anything else)",
)
FAULTS = (
    "replay_proxy_faults_injected",
    "Faults injected at a scripted turn (--fault, admin API), by kind",
)
EXPIRED = (
    "replay_proxy_sessions_expired",
    "Sessions forgotten after --session-ttl without a request",
)
OFFLOADED = (
    "replay_proxy_offloaded",
    "Steps of requests too large to work on beside the event loop, done in a worker process "
    "(--offload-bytes), by step: read, decide, match",
)
SOCKETS = (
    "replay_proxy_websockets",
    "Responses WebSocket events, by event: opened, refused (--no-websocket, or not allowed), "
    "warmup (generate: false, no turn), closed; each response.create frame is also counted as "
    "a request",
)
RESTORES = (
    "replay_proxy_restores",
    "Sessions whose replay ended (hand-off, stop or divergence), by restore verdict: restored, "
    "restart-only, unverified",
)
UPSTREAM_SECONDS = ("replay_proxy_upstream_seconds", "Upstream time to the last byte")
UPSTREAM_TTFB = ("replay_proxy_upstream_ttfb_seconds", "Upstream time to the first byte")
REQUEST_LABELS = ["api", "lane", "source", "status"]

RequestKey = tuple[str, str, str, int]  # api, lane, source, status


class Timing:
    """One histogram's numbers: a count per LATENCY bucket (the last one is +Inf) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(LATENCY, seconds)] += 1
        self.total += seconds

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative, as Prometheus has them."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(_BOUNDS, self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


class Metrics:
    """One per app (no module-level state): tests run several apps in one process."""

    def __init__(self) -> None:
        self.requests: dict[RequestKey, int] = {}
        self.divergences: dict[tuple[str, str], int] = {}
        self.faults: dict[str, int] = {}
        self.expired = 0
        self.offloads: dict[str, int] = {}
        self.socket_events: dict[str, int] = {}
        self.restores: dict[str, int] = {}
        self.timings: dict[str, tuple[Timing, Timing]] = {}  # api -> (to last byte, to first)
        self.files = Files() if os.environ.get("PROMETHEUS_MULTIPROC_DIR") else None

    def answered(self, api: str, lane: str, source: str, status: int) -> None:
        key = (api, lane, source, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        if self.files is not None:
            self.files.requests.labels(api, lane, source, str(status)).inc()

    def diverged(self, kind: str, verdict: str) -> None:
        key = (kind, verdict)
        self.divergences[key] = self.divergences.get(key, 0) + 1
        if self.files is not None:
            self.files.divergences.labels(kind, verdict).inc()

    def fault(self, kind: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1
        if self.files is not None:
            self.files.faults.labels(kind).inc()

    def offloaded(self, step: str) -> None:
        self.offloads[step] = self.offloads.get(step, 0) + 1
        if self.files is not None:
            self.files.offloaded.labels(step).inc()

    def socket(self, event: str) -> None:
        self.socket_events[event] = self.socket_events.get(event, 0) + 1
        if self.files is not None:
            self.files.sockets.labels(event).inc()

    def restore(self, verdict: str) -> None:
        self.restores[verdict] = self.restores.get(verdict, 0) + 1
        if self.files is not None:
            self.files.restores.labels(verdict).inc()

    def sessions_expired(self, count: int) -> None:
        self.expired += count
        if self.files is not None and count:
            self.files.expired.inc(count)

    def upstream(self, api: str, started: float, first_byte: float | None, finished: float) -> None:
        timings = self.timings.get(api)
        if timings is None:
            timings = self.timings[api] = (Timing(), Timing())
        timings[0].observe(finished - started)
        if first_byte is not None:
            timings[1].observe(first_byte - started)
        if self.files is not None:
            self.files.upstream_seconds.labels(api).observe(finished - started)
            if first_byte is not None:
                self.files.upstream_ttfb.labels(api).observe(first_byte - started)

    async def exposition(self, store: Store) -> bytes:
        active = GaugeMetricFamily(
            "replay_proxy_active_sessions",
            f"Sessions with a request in the last {ACTIVE_WINDOW // 60} minutes",
            value=await store.count(since=time.time() - ACTIVE_WINDOW),
        )
        kept = GaugeMetricFamily(
            "replay_proxy_sessions", "Sessions the store keeps", value=await store.count()
        )
        registry = CollectorRegistry(auto_describe=False)
        if self.files is not None:
            MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            registry.register(_Collected([active, kept]))
        else:
            registry.register(_Collected([*self._families(), active, kept]))
        return generate_latest(registry)

    def _families(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(*REQUESTS, labels=REQUEST_LABELS)
        for (api, lane, source, status), count in self.requests.items():
            requests.add_metric([api, lane, source, str(status)], count)
        yield requests
        divergences = CounterMetricFamily(*DIVERGENCES, labels=["kind", "verdict"])
        for (kind, verdict), count in self.divergences.items():
            divergences.add_metric([kind, verdict], count)
        yield divergences
        faults = CounterMetricFamily(*FAULTS, labels=["kind"])
        for kind, count in self.faults.items():
            faults.add_metric([kind], count)
        yield faults
        yield CounterMetricFamily(*EXPIRED, value=self.expired)
        offloaded = CounterMetricFamily(*OFFLOADED, labels=["step"])
        for step, count in self.offloads.items():
            offloaded.add_metric([step], count)
        yield offloaded
        sockets = CounterMetricFamily(*SOCKETS, labels=["event"])
        for event, count in self.socket_events.items():
            sockets.add_metric([event], count)
        yield sockets
        restores = CounterMetricFamily(*RESTORES, labels=["verdict"])
        for verdict, count in self.restores.items():
            restores.add_metric([verdict], count)
        yield restores
        for index, (name, documentation) in enumerate((UPSTREAM_SECONDS, UPSTREAM_TTFB)):
            histogram = HistogramMetricFamily(name, documentation, labels=["api"])
            for api, timings in self.timings.items():
                timing = timings[index]
                histogram.add_metric([api], timing.buckets(), timing.total)
            yield histogram


class Files:
    """prometheus_client's metric objects, which write to PROMETHEUS_MULTIPROC_DIR (--workers)."""

    def __init__(self) -> None:
        self.requests = Counter(*REQUESTS, REQUEST_LABELS, registry=None)
        self.divergences = Counter(*DIVERGENCES, ["kind", "verdict"], registry=None)
        self.faults = Counter(*FAULTS, ["kind"], registry=None)
        self.expired = Counter(*EXPIRED, registry=None)
        self.offloaded = Counter(*OFFLOADED, ["step"], registry=None)
        self.sockets = Counter(*SOCKETS, ["event"], registry=None)
        self.restores = Counter(*RESTORES, ["verdict"], registry=None)
        self.upstream_seconds = Histogram(
            *UPSTREAM_SECONDS, ["api"], buckets=LATENCY, registry=None
        )
        self.upstream_ttfb = Histogram(*UPSTREAM_TTFB, ["api"], buckets=LATENCY, registry=None)


class _Collected:
    """A collector of metric families made for one scrape."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families

    def describe(self) -> list[Metric]:
        return []  # no names to reserve: the registry is made for one scrape
