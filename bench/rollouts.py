"""Rollouts at the scale of a training step: many sessions, each replaying K turns, then going
live to a policy gateway that keys calls by the rollout's id in its path.

Two proxy workers on a Redis store, `--upstream 'http://gateway/sessions/{session}/v1'` and
`--upstream-header 'x-rollout-id: {session}'`. Each rollout is a client that knows nothing but
its base URL, `/s/{rollout}/t/{trajectory}/v1`: it sends the K scripted turns' requests (each
holding the history so far, as a harness does), then one more, which goes live. The gateway
stand-in answers every call with the id it was addressed by, in its path and in the header, so
the client checks that its live call reached the gateway as its own rollout: none may cross.
Reported: rollouts per second, requests per second, and any rollout that got another's answer
or an error.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.procs import process, proxy

ROLLOUTS = 2000
TURNS = 3  # K: scripted turns per rollout before it goes live
CONCURRENCY = 32
WORKERS = 2
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
TASK = "Fix the failing test."


def trajectory(path: Path) -> None:
    messages: list[Any] = [{"role": "user", "content": TASK}]
    for k in range(TURNS):
        call = {
            "id": f"c{k}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"step {k}"})},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"output {k}"})
    path.write_text(json.dumps(messages))


async def _rollouts(root: str, count: int, concurrency: int) -> dict[str, Any]:
    import aiohttp

    crossed: list[str] = []
    errors: list[str] = []
    requests = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        nonlocal requests
        rollout = f"rollout-{i}"
        url = f"{root}/s/{rollout}/t/step/v1/chat/completions"
        messages: list[Any] = [{"role": "user", "content": TASK}]
        for k in range(TURNS + 1):
            body = {"model": "policy", "messages": messages, "tools": TOOLS}
            async with session.post(url, json=body) as answer:
                data = await answer.json()
                requests += 1
                if answer.status != 200:
                    errors.append(f"{rollout} turn {k + 1}: {answer.status} {str(data)[:200]}")
                    return
            message = data["choices"][0]["message"]
            if k < TURNS:  # scripted: run the call, send its output back
                messages.append(message)
                call = message["tool_calls"][0]
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": f"output {k}"}
                )
            elif message["content"] != f"live {rollout} {rollout}":
                crossed.append(f"{rollout} got {message['content']!r}")

    async def client(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            await one(session, queue.get_nowait())

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    return {
        "rollouts": count,
        "turns_scripted": TURNS,
        "seconds": round(seconds, 2),
        "rollouts_per_s": round(count / seconds, 1),
        "requests_per_s": round(requests / seconds, 1),
        "crossed": len(crossed),
        "errors": len(errors),
        "examples": (crossed + errors)[:5],
    }


def _drive(root: str, count: int, concurrency: int, out: Any) -> None:
    """In a process of its own, as a runner is."""
    import uvloop

    out.put(uvloop.run(_rollouts(root, count, concurrency)))


def suite(
    redis_url: str, *, rollouts: int = ROLLOUTS, concurrency: int = CONCURRENCY
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        trajectory(Path(folder) / "step.json")
        with process(sys.executable, "-m", "bench.gateway") as (gateway, _):
            args = [
                "--workers", str(WORKERS), "--store", redis_url, "--trajectory-dir", folder,
                "--upstream", f"{gateway}/sessions/{{session}}/v1",
                "--upstream-header", "x-rollout-id: {session}",
            ]  # fmt: skip
            with proxy(*args) as (url, _):
                root = url.removesuffix("/v1")
                out: multiprocessing.Queue[dict[str, Any]] = multiprocessing.Queue()
                driver = multiprocessing.Process(
                    target=_drive, args=(root, rollouts, concurrency, out)
                )
                driver.start()
                result = out.get()
                driver.join()
    return {"workers": WORKERS, "concurrency": concurrency, **result}


def met(r: dict[str, Any]) -> bool:
    return bool(r["crossed"] == 0 and r["errors"] == 0)
