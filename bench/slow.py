"""Many slow streams at once: the upstream sends one event every 20 ms on each of N streams, and a
cheap asyncio client records when each event arrives. The gap between two events is 20 ms plus
whatever the path adds; the figure is how much the proxy adds to the p99 gap over going direct,
once all N streams are open (steady state), and how many streams one worker holds within 10 ms.
"""

from __future__ import annotations

import asyncio
import functools
import os
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


CHUNKS = 100  # events per stream, 20 ms apart: 2 s


COUNTS = (500, 1000, 1500, 2000)


def suite(
    counts: tuple[int, ...] = COUNTS, budget_ms: float = 10.0, workers: int = 1
) -> dict[str, Any]:
    """Gaps are counted once all streams are open. nginx (one worker) goes through the same runs
    as a reference. Every party's CPU is read per event (user and kernel apart): one worker is
    one thread, so N streams give it 1e6 / (N * 50) us per event at most, and what the upstream
    and the client spend is taken from the same two cores. With `workers` > 1 the proxy's workers
    share a SQLite store (the memory store is for one)."""
    out: dict[str, Any] = {"budget_ms": budget_ms, "workers": workers, "runs": []}
    held = nginx_held = previous = 0
    cores = min(workers, os.cpu_count() or 1)  # one thread a worker: one core each at most
    with (
        tempfile.TemporaryDirectory() as folder,
        procs.upstream(chunks=CHUNKS, delay=0.02) as (up, up_pid),
        procs.nginx(up) as (nginx_url, nginx_pid),
        procs.proxy("--upstream", up, *_workers(workers, folder)) as (proxy_url, pid),
    ):
        for n in counts:
            direct = _measured(up, n, up_pid, None)
            via_nginx = _measured(nginx_url, n, up_pid, nginx_pid)
            through = _measured(proxy_url, n, up_pid, pid)
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
                    "hop_ceiling_us_per_event": round(cores * 1e6 / (n * 50), 1),
                    "proxy_cpu_us_per_event": through["cpu_us_per_event"]["hop"],
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


def cpu_vs_nginx(run: dict[str, Any]) -> float:
    """The proxy's CPU per event over nginx's, at the first (smallest) count."""
    first = run["runs"][0]
    proxy = first["proxy"]["cpu_us_per_event"]["hop"]
    nginx = first["nginx"]["cpu_us_per_event"]["hop"]
    return float(proxy / nginx) if nginx else float("inf")


def _measured(url: str, streams: int, up_pid: int, hop_pid: int | None) -> dict[str, Any]:
    """measure(), with the CPU per event (us, user + kernel, and the kernel's part) of the
    upstream, the hop (none when direct) and this process, the client, over the whole run."""

    def now() -> list[tuple[float, float]]:
        hop = (0.0, 0.0) if hop_pid is None else procs.cpu_split(hop_pid)
        me = os.times()
        return [procs.cpu_split(up_pid), hop, (me.user, me.system)]

    events = streams * CHUNKS
    before = now()
    result = measure(url, streams)
    cpu: dict[str, float] = {}
    for name, (user0, system0), (user1, system1) in zip(
        ("upstream", "hop", "client"), before, now(), strict=True
    ):
        cpu[name] = round((user1 - user0 + system1 - system0) * 1e6 / events, 1)
        cpu[f"{name}_kernel"] = round((system1 - system0) * 1e6 / events, 1)
    result["cpu_us_per_event"] = cpu
    return result


def _workers(workers: int, folder: str) -> list[str]:
    if workers == 1:
        return []
    return ["--workers", str(workers), "--store", f"sqlite:///{folder}/state.db"]


def table(runs: list[dict[str, Any]]) -> str:
    """Added p99 gap (ms) over direct per stream count, the proxy and nginx, for each repeat; and
    the CPU per event (us, the kernel's part in brackets) of each party against the ceiling of
    the proxy's workers."""
    workers = runs[0].get("workers", 1) if runs else 1
    lines = [
        f"slow streams (one event every 20 ms each; proxy workers: {workers}): "
        "added p99 gap over direct (ms); CPU us per event (kernel's part)"
    ]
    lines.append(
        f"  {'streams':>8} {'direct p99':>11} {'proxy':>8} {'nginx':>8} {'ceiling':>8}"
        f" {'proxy cpu':>11} {'nginx cpu':>11} {'upstream':>11} {'client':>11}"
    )

    def cpu(c: dict[str, float], name: str) -> str:
        kernel = f"({c[name + '_kernel']:.1f})"
        return f"{c[name]:>5.1f} {kernel:>5}"

    for r in runs:
        for x in r["runs"]:
            proxy, nginx = x["proxy"]["cpu_us_per_event"], x["nginx"]["cpu_us_per_event"]
            lines.append(
                f"  {x['streams']:>8} {x['direct']['gap_p99_ms']:>11.2f} {x['added_p99_ms']:>+8.2f}"
                f" {x['nginx_added_p99_ms']:>+8.2f} {x['hop_ceiling_us_per_event']:>8.1f}"
                f" {cpu(proxy, 'hop')} {cpu(nginx, 'hop')} {cpu(proxy, 'upstream')}"
                f" {cpu(proxy, 'client')}"
            )
        lines.append(
            f"  held within budget: proxy {r['streams_within_budget']}, "
            f"nginx {r['nginx_streams_within_budget']}"
        )
    lines.append(
        "  ceiling: the CPU the proxy's workers have per event at that count (a core each at "
        "most, 50 events/s a stream); upstream and client: in the proxy's run"
    )
    return "\n".join(lines)
