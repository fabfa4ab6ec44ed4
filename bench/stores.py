"""Per-request overhead of each session store: scripted turns through the proxy, one worker.

Each request is a main-lane request of its own session at turn 1 (so it binds a script, reads and
writes the store), and half of them are at turn 2 of an existing session. Reported per store:
requests/s and the proxy's own CPU milliseconds per request, each as a ratio to memory://.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.loadgen import run
from bench.procs import cpu_seconds, proxy

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
TURNS = 4


def _trajectory(path: Path) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "the task"}]
    for k in range(TURNS):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": "ok"},
        ]
    path.write_text(json.dumps(messages))


def _body(i: int) -> bytes:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "the task"}]
    if i % 2:
        call = {"id": "c0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages += [
            {"role": "assistant", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c0", "content": "ok"},
        ]
    return json.dumps({"model": "m", "messages": messages, "tools": TOOLS}).encode()


def measure(store: str, trajectory: Path, *, requests: int, concurrency: int) -> dict[str, Any]:
    with proxy("--store", store, "--trajectory", str(trajectory)) as (url, pid):
        target = url + "/chat/completions"
        asyncio.run(
            run(
                target,
                _body,
                concurrency=concurrency,
                requests=200,
                headers=lambda i: {"x-session-affinity": f"w{i // 2}"},
            )
        )
        before = cpu_seconds(pid)
        stats = asyncio.run(
            run(
                target,
                _body,
                concurrency=concurrency,
                requests=requests,
                headers=lambda i: {"x-session-affinity": f"s{i // 2}"},
            )
        )
        cpu = cpu_seconds(pid) - before
    return {**stats.summary(), "cpu_ms_per_request": round(cpu * 1000 / max(stats.requests, 1), 3)}


def suite(redis_url: str | None, *, requests: int = 3000, concurrency: int = 8) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        trajectory = Path(folder) / "t.json"
        _trajectory(trajectory)
        stores = {"memory": "memory://", "sqlite": f"sqlite:///{folder}/state.db"}
        if redis_url:
            stores["redis"] = redis_url
        results = {
            name: measure(url, trajectory, requests=requests, concurrency=concurrency)
            for name, url in stores.items()
        }
    base = results["memory"]
    for r in results.values():
        r["rps_vs_memory"] = round(r["rps"] / base["rps"], 3) if base["rps"] else None
        r["cpu_vs_memory"] = (
            round(r["cpu_ms_per_request"] / base["cpu_ms_per_request"], 3)
            if base["cpu_ms_per_request"]
            else None
        )
    return results


def table(results: dict[str, Any]) -> str:
    lines = ["per-request overhead by store (scripted turns, 1 worker, concurrency 8)"]
    for name, r in results.items():
        lines.append(
            f"  {name:<8} {r['rps']:>8.0f} req/s ({r['rps_vs_memory']:.2f}x memory)  "
            f"{r['cpu_ms_per_request']:.3f} CPU ms/request ({r['cpu_vs_memory']:.2f}x)  p50 {r['p50_ms']} ms  p99 {r['p99_ms']} ms"
        )
    return "\n".join(lines)
