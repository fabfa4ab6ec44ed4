"""What sessions and trajectories cost: memory per session, and loading a large trajectory.

- memory: 100 trajectories loaded; 10,000 sessions, each bound (by task) to one of them and served
  one scripted turn. Reported: the proxy's resident memory per session beyond the scripts, and
  whether a trajectory bound to many sessions is held once (the same object for all of them).
- load: a 10 MB trajectory through the loader, against json.loads of the same file.
- request: what reading one long agent request costs on the hot path (no target; for tracking):
  the body decoded (orjson), and the decision's parse of its history, for a 101-message history.
"""

from __future__ import annotations

import asyncio
import gc
import json
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import aiohttp
import orjson

from bench import procs
from proxy.apis.chat import parse_chat
from proxy.formats import load_bytes

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def _trajectory(i: int, turns: int = 20) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"task number {i}: fix the bug in module {i}"}
    ]
    for k in range(turns):
        call = {
            "id": f"call_{i}_{k}",
            "type": "function",
            "function": {
                "name": "bash",
                "arguments": json.dumps({"command": f"grep -rn thing{k} src/ | head -50"}),
            },
        }
        messages.append(
            {
                "role": "assistant",
                "content": f"Looking at step {k} of the problem.",
                "tool_calls": [call],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call["id"], "content": "src/a.py:1: thing\n" * 20}
        )
    return messages


async def _sessions(url: str, count: int, trajectories: int) -> None:
    connector = aiohttp.TCPConnector(limit=32)
    async with aiohttp.ClientSession(connector=connector) as client:

        async def one(n: int) -> None:
            task = f"task number {n % trajectories}: fix the bug in module {n % trajectories}"
            body = {"model": "m", "messages": [{"role": "user", "content": task}], "tools": TOOLS}
            async with client.post(
                url + "/chat/completions",
                json=body,
                headers={"x-session-affinity": f"session-{n:06d}"},
            ) as r:
                assert r.status == 200, await r.text()
                await r.read()

        for start in range(0, count, 500):
            await asyncio.gather(*(one(n) for n in range(start, min(count, start + 500))))


def memory(sessions: int = 10_000, trajectories: int = 100) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(trajectories):
            (folder / f"t{i:03d}.json").write_text(json.dumps(_trajectory(i)))
        with procs.proxy("--trajectory-dir", str(folder), "--bind-on-task") as (url, pid):
            asyncio.run(_sessions(url, 50, trajectories))  # warm up: code paths, pools, caches
            loaded = procs.rss_bytes(pid)
            asyncio.run(_sessions(url, sessions, trajectories))
            after = procs.rss_bytes(pid)
    per_session = (after - loaded) / sessions
    return {
        "sessions": sessions,
        "trajectories": trajectories,
        "rss_with_trajectories_mb": round(loaded / 2**20, 1),
        "rss_with_sessions_mb": round(after / 2**20, 1),
        "bytes_per_session": round(per_session),
    }


def shared_script() -> bool:
    """Sessions bound to one trajectory share one Trajectory object (checked in-process)."""
    from proxy.sessions.library import Library

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.json"
        path.write_text(json.dumps(_trajectory(1)))
        library = Library.load([path], None)
        return library.named("t") is library.named("t") and len(library) == 1


def load(megabytes: float = 10.0, repeat: int = 5) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    i = 0
    while True:
        messages.extend(_trajectory(i, turns=50)[1 if messages else 0 :])
        data = json.dumps(messages).encode()
        if len(data) >= megabytes * 2**20:
            break
        i += 1
    parse, ours = [], []
    for _ in range(repeat):
        gc.collect()
        started = time.perf_counter()
        json.loads(data)
        parse.append(time.perf_counter() - started)
        gc.collect()
        started = time.perf_counter()
        trajectory = load_bytes(data, name="big", filename="big.json")
        ours.append(time.perf_counter() - started)
    return {
        "megabytes": round(len(data) / 2**20, 1),
        "turns": len(trajectory.turns),
        "json_loads_ms": round(median(parse) * 1000, 1),
        "load_ms": round(median(ours) * 1000, 1),
        "ratio": round(median(ours) / median(parse), 2),
    }


def request(turns: int = 50, number: int = 2000, repeat: int = 7) -> dict[str, Any]:
    body = {"model": "m", "messages": _trajectory(0, turns), "tools": TOOLS}
    raw = orjson.dumps(body)
    decoded = orjson.loads(raw)

    def best(step: Any) -> float:
        runs = []
        for _ in range(repeat):
            started = time.perf_counter()
            for _ in range(number):
                step()
            runs.append((time.perf_counter() - started) / number)
        return round(min(runs) * 1e6, 1)

    return {
        "messages": len(body["messages"]),
        "body_kb": round(len(raw) / 1024, 1),
        "decode_us": best(lambda: orjson.loads(raw)),
        "parse_us": best(lambda: parse_chat(decoded)),
    }
