"""Many sessions replayed at once, as a fleet of agents would: used by tests and benchmarks.

Each session i has its own trajectory (task "task i", tool-call ids "t{i}-c{k}"), found by task.
Every few turns the same request is sent twice at once, as a retrying client would, and both
copies must get the same turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).parents[2]
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def call_id(i: int, k: int) -> str:
    return f"t{i}-c{k}"


def write_trajectories(folder: Path, sessions: int, turns: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(sessions):
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"task {i}"}]
        for k in range(turns):
            args = json.dumps({"command": f"echo {i}-{k}"})
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id(i, k),
                            "type": "function",
                            "function": {"name": "bash", "arguments": args},
                        }
                    ],
                }
            )
            messages.append({"role": "tool", "tool_call_id": call_id(i, k), "content": "ok"})
        (folder / f"traj-{i:04d}.json").write_text(json.dumps(messages))


def session_name(i: int) -> str:
    return f"s{i:04d}"


async def _ask(
    client: httpx.AsyncClient, url: str, session: str, messages: list[Any]
) -> tuple[str, str]:
    body = {"model": "m", "messages": messages, "tools": TOOLS}
    r = await client.post(
        url + "/chat/completions", json=body, headers={"x-session-affinity": session}
    )
    assert r.status_code == 200, r.text
    call = r.json()["choices"][0]["message"]["tool_calls"][0]
    return r.headers["x-replay-turn"], call["id"]


async def replay(
    urls: Sequence[str],
    sessions: range,
    until: int,
    *,
    twins_every: int = 5,
    histories: dict[int, list[Any]] | None = None,
    on_answer: Callable[[], None] | None = None,
    stop_on_transport_error: bool = False,
) -> dict[int, list[tuple[str, str]]]:
    """Take every session from where its history stands up to turn `until`; returns the
    (x-replay-turn, tool-call id) each turn got. `histories` carries the messages across calls."""
    histories = histories if histories is not None else {}
    # keepalive_expiry: httpx closes a connection idle for 5 s by default, and on a loaded
    # machine its pool can close one just handed to a request (ClosedResourceError, a ReadError);
    # under the proxy's own 120 s, so that the proxy never closes one first
    limits = httpx.Limits(
        max_connections=len(sessions) * 2,
        max_keepalive_connections=len(sessions) * 2,
        keepalive_expiry=60,
    )
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def run(i: int) -> tuple[int, list[tuple[str, str]]]:
            messages = histories.setdefault(i, [{"role": "user", "content": f"task {i}"}])
            got: list[tuple[str, str]] = []
            for k in range(len(messages) // 2, until):
                url = urls[(i + k) % len(urls)]
                try:
                    if twins_every and k % twins_every == 0:
                        other = urls[(i + k + 1) % len(urls)]
                        a, b = await asyncio.gather(
                            _ask(client, url, session_name(i), messages),
                            _ask(client, other, session_name(i), messages),
                        )
                        assert a == b, f"session {i} turn {k}: twins got {a} and {b}"
                    else:
                        a = await _ask(client, url, session_name(i), messages)
                except httpx.TransportError:
                    if not stop_on_transport_error:
                        raise
                    return i, got  # the proxy went away: this session resumes later
                got.append(a)
                if on_answer is not None:
                    on_answer()
                call = {
                    "id": a[1],
                    "type": "function",
                    "function": {"name": "bash", "arguments": "{}"},
                }
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
                messages.append({"role": "tool", "tool_call_id": a[1], "content": "ok"})
            return i, got

        return dict(await asyncio.gather(*(run(i) for i in sessions)))


def expected(i: int, turns: range, total: int) -> list[tuple[str, str]]:
    return [(f"{k + 1}/{total}", call_id(i, k)) for k in turns]


def all_turns(history: list[Any]) -> list[str]:
    """The tool-call ids a session's history holds, in order."""
    return [m["tool_calls"][0]["id"] for m in history if m["role"] == "assistant"]


@contextmanager
def proxy_process(
    *args: str, env: dict[str, str] | None = None, log: Any = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`replay-proxy serve --port 0 ARGS`; yields (base URL with /v1, the process). Without
    --admin-token in ARGS, the admin API is served without one (--insecure-admin), as these
    tests read every session's status. `log`: where its stderr goes (a file); by default it is
    inherited."""
    admin = () if "--admin-token" in args else ("--insecure-admin",)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxy",
            "serve",
            "--port",
            "0",
            "--log-level",
            "warning",
            *admin,
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        start_new_session=True,  # its workers die with it
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if "listening on " not in line:
            raise RuntimeError(
                f"the proxy did not start (its stderr went to {log or 'the test log'})"
            )
        yield line.rsplit("listening on ", 1)[1].strip(), process
    finally:
        kill(process, signal.SIGTERM)


def kill(process: subprocess.Popen[str], sig: int) -> None:
    if process.poll() is None:
        os.killpg(process.pid, sig)
        process.wait(timeout=60)


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus exposition."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name}{{{want}}} in:\n{text}")
