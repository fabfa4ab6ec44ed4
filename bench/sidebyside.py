"""python -m bench peers: the proxy's scripted turn side by side with the other LLM mock servers
(bench.peers), every server giving the same answer to the same request, on every API it serves.

Before anything is timed, each server's answer on each API, JSON and stream, is read back the way
the proxy reads a recorded answer (proxy.apis: the SDKs' assembly) and compared with the turn:
the text, the call's name and arguments (as JSON), the finish reason. An answer that differs is
reported and not timed. Then wrk at concurrency 8, every cell once to warm up (Node's JIT, the
peers' caches), then `repeat` rounds over all cells, so that drift in the machine's speed falls on
every server alike; each figure is the median of its rounds. While one server is measured, the
others are stopped (SIGSTOP), so their idle work takes nothing from it.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median
from typing import Any

import httpx

from bench import peers, procs, wrk
from bench.throughput import CALL_ARGUMENTS, CALL_NAME, SAID, TASK, trajectory
from proxy.apis import BY_NAME

PROXY = "replay-proxy"
CONCURRENCY = 8
APIS = ("chat", "responses", "anthropic", "gemini")
# how each API says "the turn ends in a tool call"; aimock ends a Gemini call with FUNCTION_CALL,
# which Gemini itself does not send (it says STOP), but which no client reads differently
FINISH = {
    "chat": {"tool_calls"},
    "responses": {"tool_calls"},
    "anthropic": {"tool_use"},
    "gemini": {"STOP", "FUNCTION_CALL"},
}
_SCHEMA = {"type": "object"}


def call(api: str, stream: bool) -> tuple[str, bytes]:
    """The path (without a peer's prefix) and body of the benchmark's request on one API."""
    user = {"role": "user", "content": TASK}
    body: dict[str, Any]
    if api == "chat":
        tool = {"type": "function", "function": {"name": CALL_NAME, "parameters": _SCHEMA}}
        path, body = "/v1/chat/completions", {"model": "bench", "messages": [user], "tools": [tool]}
    elif api == "responses":
        tool = {"type": "function", "name": CALL_NAME, "parameters": _SCHEMA}
        path, body = "/v1/responses", {"model": "bench", "input": [user], "tools": [tool]}
    elif api == "anthropic":
        tool = {"name": CALL_NAME, "input_schema": _SCHEMA}
        path = "/v1/messages"
        body = {"model": "bench", "max_tokens": 1024, "messages": [user], "tools": [tool]}
    else:
        method = "streamGenerateContent?alt=sse" if stream else "generateContent"
        path = f"/v1beta/models/bench:{method}"
        declaration = {"name": CALL_NAME, "parameters": _SCHEMA}
        body = {
            "contents": [{"role": "user", "parts": [{"text": TASK}]}],
            "tools": [{"functionDeclarations": [declaration]}],
        }
        return path, json.dumps(body, separators=(",", ":")).encode()
    if stream:
        body["stream"] = True
    return path, json.dumps(body, separators=(",", ":")).encode()


@dataclass
class Heard:
    """An answer read back: what a client of the API gets out of it."""

    text: str | None
    name: str | None
    arguments: Any
    finish: str | None
    events: int  # SSE events of a stream; 0 for JSON

    def differences(self, api: str) -> list[str]:
        wrong = []
        if self.text != SAID:
            wrong.append(f"text {self.text!r}")
        if self.name != CALL_NAME:
            wrong.append(f"call {self.name!r}")
        if self.arguments != json.loads(CALL_ARGUMENTS):
            wrong.append(f"arguments {self.arguments!r}")
        if self.finish not in FINISH[api]:
            wrong.append(f"finish {self.finish!r}")
        return wrong


def heard(api: str, raw: bytes, stream: bool) -> Heard:
    read = BY_NAME[api].read_answer(raw, stream)
    message = read.message or {}
    calls = message.get("tool_calls") or []
    function = calls[0].get("function", {}) if len(calls) == 1 else {}
    try:
        arguments = json.loads(function.get("arguments") or "null")
    except json.JSONDecodeError:
        arguments = function.get("arguments")
    return Heard(
        message.get("content"),
        function.get("name"),
        arguments,
        read.finish_reason,
        len(read.events or []),
    )


def _headers(peer: peers.Peer | None) -> dict[str, str]:
    return {"x-session-affinity": "bench", **(peer.headers if peer else {})}


def _check(url: str, api: str, stream: bool, headers: dict[str, str]) -> dict[str, Any]:
    path, body = call(api, stream)
    r = httpx.post(
        url + path,
        content=body,
        headers={"content-type": "application/json", **headers},
        timeout=60,
    )
    if r.status_code != 200:
        return {"status": r.status_code, "differences": [f"HTTP {r.status_code}: {r.text[:200]}"]}
    answer = heard(api, r.content, stream)
    return {"status": 200, **asdict(answer), "differences": answer.differences(api)}


@dataclass(frozen=True)
class Cell:
    server: str
    url: str  # with the server's prefix for the API
    pid: int
    api: str
    kind: str  # json | stream
    headers: dict[str, str]

    @property
    def key(self) -> str:
        return f"{self.server}/{self.api}/{self.kind}"


@contextmanager
def alone(pid: int, others: list[int]) -> Iterator[None]:
    """Every other server stopped (SIGSTOP) while one is measured: an idle server's timers and
    background tasks (LiteLLM has several) take no CPU from the one under load."""
    paused = [p for p in others if p != pid]
    for p in paused:
        os.killpg(p, signal.SIGSTOP)
    try:
        yield
    finally:
        for p in paused:
            os.killpg(p, signal.SIGCONT)


def _time(cell: Cell, seconds: float) -> dict[str, Any]:
    path, body = call(cell.api, cell.kind == "stream")
    before = procs.cpu_seconds(cell.pid)
    result = wrk.run(
        cell.url + path, body, connections=CONCURRENCY, seconds=seconds, headers=cell.headers
    )
    pid = cell.pid
    result["cpu_ms_per_request"] = round(
        (procs.cpu_seconds(pid) - before) * 1000 / max(result["requests"], 1), 4
    )
    return result


def suite(seconds: float, repeat: int, only: list[str] | None = None) -> dict[str, Any]:
    chosen = [p for p in peers.PEERS if only is None or p.name in only]
    out: dict[str, Any] = {
        "concurrency": CONCURRENCY,
        "servers": {
            p.name: {"version": p.version, "runtime": p.runtime, "apis": list(p.apis)}
            for p in chosen
        },
        "checks": {},
        "cells": {},
    }
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        work = Path(tmp)
        trajectory(work / "bench.json")
        base, proxy_pid = stack.enter_context(procs.proxy("--trajectory", str(work / "bench.json")))
        proxy_apis = dict.fromkeys(APIS, "")
        servers = [(PROXY, base.removesuffix("/v1"), proxy_pid, proxy_apis, _headers(None))]
        for peer in chosen:
            url, pid = stack.enter_context(peer.running(work))
            servers.append((peer.name, url, pid, peer.apis, _headers(peer)))
        cells = []
        for name, url, pid, apis, headers in servers:
            for api, prefix in apis.items():
                for kind in ("json", "stream"):
                    cell = Cell(name, url + prefix, pid, api, kind, headers)
                    check = _check(cell.url, api, kind == "stream", headers)
                    out["checks"][cell.key] = check
                    if check["differences"]:
                        if name == PROXY:
                            raise RuntimeError(f"the proxy's {api} {kind} answer: {check}")
                        continue
                    cells.append(cell)
        pids = [pid for _, _, pid, _, _ in servers]
        for cell in cells:  # warm-up, not kept
            with alone(cell.pid, pids):
                _time(cell, 1)
        rounds: dict[str, list[dict[str, Any]]] = {}
        for _ in range(repeat):
            for cell in cells:
                with alone(cell.pid, pids):
                    rounds.setdefault(cell.key, []).append(_time(cell, seconds))
        for key, runs in rounds.items():
            out["cells"][key] = {
                "rps": median(r["rps"] for r in runs),
                "cpu_ms_per_request": median(r["cpu_ms_per_request"] for r in runs),
                "non_2xx": sum(r["non_2xx"] + r["socket_errors"] for r in runs),
                "runs": runs,
            }
    return out


def lead(results: dict[str, Any], peer: str, api: str, kind: str) -> tuple[float, float] | None:
    """(the proxy's requests/s over the peer's, the peer's CPU per request over the proxy's)."""
    cells = results["cells"]
    mine, theirs = cells.get(f"{PROXY}/{api}/{kind}"), cells.get(f"{peer}/{api}/{kind}")
    if mine is None or theirs is None:
        return None
    return (
        mine["rps"] / theirs["rps"],
        theirs["cpu_ms_per_request"] / mine["cpu_ms_per_request"],
    )


def table(results: dict[str, Any]) -> str:
    lines = [
        f"peers at c={results['concurrency']}: requests/s, CPU ms per request of the server, "
        "events per stream; in brackets the proxy's lead in requests/s"
    ]
    names = [PROXY, *results["servers"]]
    for api in APIS:
        lines.append(f"  {api}")
        for name in names:
            cells = []
            for kind in ("json", "stream"):
                key = f"{name}/{api}/{kind}"
                check = results["checks"].get(key)
                cell = results["cells"].get(key)
                if check is None:
                    cells.append(f"{'(not served)':>34}")
                elif cell is None:
                    cells.append(f"{'differs: ' + '; '.join(check['differences'])[:40]:>34}")
                else:
                    ahead = lead(results, name, api, kind) if name != PROXY else None
                    ratio = f"({ahead[0]:.2f}x)" if ahead else ""
                    events = f"{check['events']:>3} ev" if kind == "stream" else ""
                    cells.append(
                        f"{cell['rps']:>9,.0f} {ratio:>8} {cell['cpu_ms_per_request']:>7.3f} ms"
                        f"{events:>7}"
                    )
            lines.append(f"    {name:<14}" + "".join(cells))
    return "\n".join(lines)


def targets(results: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """The proxy ahead of every peer on every API both serve, JSON at least 1.5x aimock, and
    scripted streams at no more CPU than aimock's."""
    rows: list[tuple[str, str, str, bool]] = []
    for peer in results["servers"]:
        for api in APIS:
            for kind in ("json", "stream"):
                ahead = lead(results, peer, api, kind)
                if ahead is None:
                    continue
                wanted = 1.5 if (peer, api, kind) == ("aimock", "chat", "json") else 1.0
                rows.append(
                    (
                        f"scripted {api} {kind} vs {peer}, requests/s",
                        f"{ahead[0]:.2f}x",
                        f">= {wanted}x",
                        ahead[0] >= wanted,
                    )
                )
                if peer == "aimock" and kind == "stream":
                    rows.append(
                        (
                            f"scripted {api} stream, aimock's CPU per stream over the proxy's",
                            f"{ahead[1]:.2f}x",
                            ">= 1x",
                            ahead[1] >= 1.0,
                        )
                    )
    return rows
