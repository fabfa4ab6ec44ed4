"""The forwarding client, chosen by measurement: the same minimal pass-through (bench.forwarder)
over each client library, against one fast upstream, side by side with nginx, with wrk.

For each: requests/s as a ratio to nginx's and the CPU milliseconds per request of the forwarding
process, JSON at concurrency 8 and 64-chunk streams at 8 and 64 (the scenarios of the forwarding
targets).
"""

from __future__ import annotations

import sys
from typing import Any

from bench import procs, throughput

CLIENTS = ("aiohttp", "httpx-aiohttp", "httpx")
SCENARIOS = ((False, 8), (True, 8), (True, 64))


def suite(seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with procs.upstream(chunks=64) as (up, _):
        origin = up.removesuffix("/v1")
        with procs.nginx(up) as (url, pid):
            for stream, c in SCENARIOS:
                out[_key("nginx", stream, c)] = throughput.measure(url, pid, stream, c, seconds)
        for client in CLIENTS:
            env = {"UPSTREAM": origin, "CLIENT": client}
            with procs.process(sys.executable, "-m", "bench.forwarder", env=env) as (url, pid):
                for stream, c in SCENARIOS:
                    out[_key(client, stream, c)] = throughput.measure(url, pid, stream, c, seconds)
    return out


def _key(who: str, stream: bool, c: int) -> str:
    return f"{who}/{'stream' if stream else 'json'}/c{c}"


def table(results: dict[str, Any]) -> str:
    lines = ["forwarding clients (requests/s, ratio to nginx, CPU ms per request)"]
    lines.append(f"  {'client':<16}" + "".join(f"{_key('', s, c)[1:]:>30}" for s, c in SCENARIOS))
    for who in ("nginx", *CLIENTS):
        cells = []
        for stream, c in SCENARIOS:
            r = results[_key(who, stream, c)]
            ratio = r["rps"] / results[_key("nginx", stream, c)]["rps"]
            cells.append(f"{r['rps']:>9.0f} {ratio:>6.2f}x {r['cpu_ms_per_request']:>7.3f}ms")
        lines.append(f"  {who:<16}" + "".join(f"{cell:>30}" for cell in cells))
    return "\n".join(lines)
