"""A closed-loop load generator: `concurrency` clients, each sending its next request as soon as
the previous answer has fully arrived. Reports requests/s, latency percentiles and, for streams,
time to first and last chunk. aiohttp's client, so that the generator costs less than what it
measures.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp


@dataclass
class Stats:
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, request sent -> last byte
    first_chunk: list[float] = field(default_factory=list)  # seconds, request sent -> first byte
    gaps: list[float] = field(default_factory=list)  # seconds between two chunks of one stream

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "rps": round(self.rps, 1),
            "p50_ms": _ms(percentile(self.latencies, 50)),
            "p99_ms": _ms(percentile(self.latencies, 99)),
            "ttfb_p50_ms": _ms(percentile(self.first_chunk, 50)),
            "ttfb_p99_ms": _ms(percentile(self.first_chunk, 99)),
            "gap_p99_ms": _ms(percentile(self.gaps, 99)),
        }


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, int(p) - 1))]


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


async def run(
    url: str,
    body: Callable[[int], bytes],
    *,
    concurrency: int,
    requests: int,
    headers: Callable[[int], dict[str, str]] | None = None,
    gaps: bool = False,
    warmup: int = 0,
) -> Stats:
    """Send `requests` POSTs (after `warmup` unmeasured ones); body(i) and headers(i) per request."""
    stats = Stats()
    connector = aiohttp.TCPConnector(limit=concurrency, force_close=False)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        counter = iter(range(warmup + requests))
        started_at: list[float] = []

        async def one(i: int, measure: bool) -> None:
            sent = time.perf_counter()
            try:
                async with session.post(
                    url,
                    data=body(i),
                    headers={"content-type": "application/json", **(headers(i) if headers else {})},
                ) as r:
                    first: float | None = None
                    last = sent
                    async for _ in r.content.iter_any():
                        now = time.perf_counter()
                        if first is None:
                            first = now
                        elif gaps and measure:
                            stats.gaps.append(now - last)
                        last = now
                    ok = r.status == 200
            except aiohttp.ClientError:
                ok = False
            if not measure:
                return
            if not ok:
                stats.errors += 1
                return
            done = time.perf_counter()
            stats.requests += 1
            stats.latencies.append(done - sent)
            if first is not None:
                stats.first_chunk.append(first - sent)

        async def worker() -> None:
            for i in counter:
                measure = i >= warmup
                if measure and not started_at:
                    started_at.append(time.perf_counter())
                await one(i, measure)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        stats.seconds = time.perf_counter() - (started_at[0] if started_at else time.perf_counter())
    return stats
