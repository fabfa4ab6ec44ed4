"""Many slow streams at once: the upstream sends one event every 20 ms on each of N streams, and a
cheap asyncio client records when each event arrives. The gap between two events is 20 ms plus
whatever the path adds; the figure is how much the proxy adds to the p99 gap over going direct,
once all N streams are open (steady state), and how many streams one worker holds within 10 ms.
"""

from __future__ import annotations

import asyncio
import functools
import tempfile
import time
from statistics import quantiles
from typing import Any

import uvloop

from bench import procs

BODY = b'{"model":"bench","stream":true,"messages":[{"role":"user","content":"slow"}]}'


WARMUP = 20  # the first gaps of each stream, while all of them are still being opened, do not count


class Stream(asyncio.Protocol):
    def __init__(self, request: bytes, gaps: list[float], done: asyncio.Future[None]) -> None:
        self.request, self.gaps, self.done = request, gaps, done
        self.last: float | None = None
        self.headers_seen = False
        self.seen = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        if not self.headers_seen:  # the head, perhaps with a first event
            self.headers_seen = True
            self.last = now
            return
        self.seen += 1
        if self.last is not None and self.seen > WARMUP:
            self.gaps.append(now - self.last)
        self.last = now
        if data.endswith(b"0\r\n\r\n") and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _run(url: str, streams: int) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split("/", 1)[0].split(":")
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY
    loop = asyncio.get_running_loop()
    gaps: list[float] = []
    waits: list[asyncio.Future[None]] = []
    transports = []
    for i in range(streams):
        done: asyncio.Future[None] = loop.create_future()
        waits.append(done)
        transport, _ = await loop.create_connection(
            functools.partial(Stream, request, gaps, done), host, int(port)
        )
        transports.append(transport)
        if i % 100 == 99:
            await asyncio.sleep(0.02)  # open them over a few ticks, not all in one
    await asyncio.gather(*waits)
    for t in transports:
        t.close()
    cut = quantiles(gaps, n=100, method="inclusive")
    return {
        "streams": streams,
        "events": len(gaps),
        "gap_p50_ms": round(cut[49] * 1000, 2),
        "gap_p99_ms": round(cut[98] * 1000, 2),
        "gap_max_ms": round(max(gaps) * 1000, 2),
    }


def measure(url: str, streams: int) -> dict[str, Any]:
    return uvloop.run(_run(url, streams))


def suite(
    counts: tuple[int, ...] = (500, 1000, 1500, 2000), budget_ms: float = 10.0, workers: int = 1
) -> dict[str, Any]:
    """Each stream is 100 events, 20 ms apart (2 s); gaps are counted once all streams are open.
    nginx (one worker) goes through the same runs as a reference: on a small machine the upstream
    and the client take most of the CPU at the top counts, whatever sits in between. With
    `workers` > 1 the proxy's workers share a SQLite store (the memory store is for one)."""
    out: dict[str, Any] = {"budget_ms": budget_ms, "workers": workers, "runs": []}
    held = nginx_held = previous = 0
    with (
        tempfile.TemporaryDirectory() as folder,
        procs.upstream(chunks=100, delay=0.02) as (up, _),
        procs.nginx(up) as (nginx_url, _),
        procs.proxy("--upstream", up, *_workers(workers, folder)) as (proxy_url, pid),
    ):
        for n in counts:
            direct = measure(up, n)
            via_nginx = measure(nginx_url, n)
            before = procs.cpu_seconds(pid)
            through = measure(proxy_url, n)
            cpu = procs.cpu_seconds(pid) - before
            added = round(through["gap_p99_ms"] - direct["gap_p99_ms"], 2)
            nginx_added = round(via_nginx["gap_p99_ms"] - direct["gap_p99_ms"], 2)
            out["runs"].append(
                {
                    "streams": n,
                    "direct": direct,
                    "nginx": via_nginx,
                    "proxy": through,
                    "added_p99_ms": added,
                    "nginx_added_p99_ms": nginx_added,
                    "proxy_cpu_s": round(cpu, 2),
                    "proxy_cpu_us_per_event": round(cpu * 1e6 / max(through["events"], 1), 1),
                }
            )
            # held: the largest count up to which every count was within the budget
            if added <= budget_ms and held == previous:
                held = n
            if nginx_added <= budget_ms and nginx_held == previous:
                nginx_held = n
            previous = n
    out["streams_within_budget"] = held
    out["nginx_streams_within_budget"] = nginx_held
    return out


def _workers(workers: int, folder: str) -> list[str]:
    if workers == 1:
        return []
    return ["--workers", str(workers), "--store", f"sqlite:///{folder}/state.db"]


def table(runs: list[dict[str, Any]]) -> str:
    """Added p99 gap (ms) over direct, per stream count: the proxy and nginx, for each repeat."""
    workers = runs[0].get("workers", 1) if runs else 1
    lines = [
        f"slow streams (one event every 20 ms each; proxy workers: {workers}): "
        "added p99 gap over direct, ms"
    ]
    lines.append(
        f"  {'streams':>8} {'direct p99':>11} {'proxy':>8} {'nginx':>8} {'proxy us/event':>15}"
    )
    for r in runs:
        for x in r["runs"]:
            lines.append(
                f"  {x['streams']:>8} {x['direct']['gap_p99_ms']:>11.2f} {x['added_p99_ms']:>+8.2f}"
                f" {x['nginx_added_p99_ms']:>+8.2f} {x['proxy_cpu_us_per_event']:>15.1f}"
            )
        lines.append(
            f"  held within budget: proxy {r['streams_within_budget']}, "
            f"nginx {r['nginx_streams_within_budget']}"
        )
    return "\n".join(lines)
