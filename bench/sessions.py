"""Long sessions shaped like real ones, at real sizes: what a request costs the proxy per KB.

Each session is a harness log from tests/fixtures (a Claude Code session, a Codex rollout, a
NeMo-Gym rollout), read by the proxy's own loader and grown to TURNS tool-calling turns: its
steps taken in turn, each call with an id of its own, each tool output padded with the log's own
output text, so that the last request holds about LAST_KB of conversation (a 100k-token context).
Every request holds the whole history so far, as a harness sends it, over Chat Completions.

Four ways through the proxy, each with SESSIONS sessions, CONCURRENT at a time:
- forwarded: no script, every request goes to the bench upstream (and, for what the libraries
  cost alone, bench.forwarder: uvicorn and aiohttp passing each request on, nothing else);
- scripted: the grown session is the script (resume mode), every turn answered from it;
- recorded: the same, recorded (--record-dir);
- strict: those recordings replayed in --mode strict, each request compared with its recorded one.

References, on the same bodies: one `orjson.loads` (in this process), and nginx as a plain
pass-through hop to the same upstream (its CPU). The turns run in four phases by size (all
sessions' first quarter of turns, then the second, ...), so the CPU per request is given against
the body size: the growth curve.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from statistics import quantiles
from typing import Any

import httpx
import orjson

from bench.procs import ROOT, cpu_seconds, nginx, process, proxy, upstream

SHAPES = {
    "claude-code": ROOT / "tests/fixtures/harness_logs/claude-code/session.jsonl",
    "codex": ROOT / "tests/fixtures/harness_logs/codex/rollout.jsonl",
    "nemo-gym": ROOT / "tests/fixtures/corpus/nemo-gym/anyterminal_hermes.jsonl",
}
TURNS = 40
LAST_KB = 380
SESSIONS = 12  # per shape
CONCURRENT = 8
PHASES = 4
PATHS = ("nginx", "libraries", "forwarded", "scripted", "recorded", "strict")


def grown(path: Path, turns: int = TURNS, last_kb: int = LAST_KB) -> list[dict[str, Any]]:
    """The log's conversation, grown to `turns` tool-calling turns and a final answer."""
    from proxy.formats import load_all
    from proxy.formats.convert import to_messages

    [t, *_] = load_all(path)
    steps = [turn for turn in t.turns if turn.tool_calls]
    outputs = [o for o in t.tool_outputs.values() if o.strip()] or ["total 0"]
    filler = "\n".join(outputs)
    per_output = last_kb * 1024 // turns
    padding = (filler * (per_output // max(len(filler), 1) + 1))[:per_output]
    messages: list[dict[str, Any]] = [m for m in to_messages(t)[:2] if m["role"] != "assistant"]
    for k in range(turns):
        step = steps[k % len(steps)]
        calls = [
            {
                "id": f"{c.id}-{k}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in step.tool_calls
        ]
        messages.append({"role": "assistant", "content": step.text or None, "tool_calls": calls})
        for c in calls:
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": padding})
    messages.append({"role": "assistant", "content": "Done: every step ran."})
    return messages


def bodies(messages: list[dict[str, Any]]) -> list[bytes]:
    """Each request of the session: the history up to the next answer, offering every tool the
    session calls."""
    names = sorted({c["function"]["name"] for m in messages for c in m.get("tool_calls") or []})
    tools = [
        {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
        for n in names
    ]
    out = []
    for k, m in enumerate(messages):
        if m["role"] == "assistant":
            out.append(orjson.dumps({"model": "bench", "messages": messages[:k], "tools": tools}))
    return out


def _phases(n: int) -> list[range]:
    edges = [round(n * p / PHASES) for p in range(PHASES + 1)]
    return [range(edges[p], edges[p + 1]) for p in range(PHASES)]


def drive(
    url: str, pid: int, sessions: list[tuple[str, str, list[bytes]]], headers: Callable[..., Any]
) -> dict[str, Any]:
    """Every session's requests, CONCURRENT sessions at a time, phase by phase; the serving
    process's CPU per request and per KB in each phase, and the latencies."""
    clients = threading.local()
    latencies: list[float] = []
    errors: list[str] = []
    phases = []

    def one(session: str, name: str, requests: list[bytes], turns: range) -> None:
        client = getattr(clients, "c", None) or httpx.Client(timeout=300)
        clients.c = client
        for k in turns:
            started = time.perf_counter()
            answer = client.post(
                url + "/chat/completions",
                content=requests[k],
                headers={"content-type": "application/json", **headers(session, name)},
            )
            latencies.append(time.perf_counter() - started)
            if answer.status_code != 200:
                errors.append(f"{session} turn {k + 1}: {answer.status_code} {answer.text[:200]}")

    n = len(sessions[0][2])
    with ThreadPoolExecutor(CONCURRENT) as pool:
        for turns in _phases(n):
            before = cpu_seconds(pid)
            work = [pool.submit(one, s, name, requests, turns) for s, name, requests in sessions]
            for done in work:
                done.result()
            cpu = cpu_seconds(pid) - before
            count = len(sessions) * len(turns)
            kb = sum(len(r[k]) for _, _, r in sessions for k in turns) / 1024
            phases.append(
                {
                    "kb_per_request": round(kb / count, 1),
                    "cpu_ms_per_request": round(cpu * 1000 / count, 3),
                    "cpu_us_per_kb": round(cpu * 1e6 / kb, 2),
                }
            )
    cpu_total = sum(p["cpu_ms_per_request"] * len(sessions) * len(t) for p, t in
                    zip(phases, _phases(n), strict=True)) / 1000  # fmt: skip
    kb_total = sum(len(b) for _, _, r in sessions for b in r) / 1024
    cuts = quantiles(latencies, n=100)
    return {
        "requests": len(latencies),
        "errors": errors[:5],
        "error_count": len(errors),
        "mb": round(kb_total / 1024, 1),
        "cpu_us_per_kb": round(cpu_total * 1e6 / kb_total, 2),
        "cpu_ms_per_request": round(cpu_total * 1000 / len(latencies), 3),
        "p50_ms": round(cuts[49] * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
        "phases": phases,
    }


def libraries(up: str) -> AbstractContextManager[tuple[str, int]]:
    """uvicorn and aiohttp alone, as the proxy runs them: the least forwarding costs here."""
    env = {"UPSTREAM": up.removesuffix("/v1"), "CLIENT": "aiohttp"}
    return process(sys.executable, "-m", "bench.forwarder", env=env)


def loads_us_per_kb(all_bodies: list[bytes]) -> float:
    """One orjson.loads of each body: the least a request's reading costs."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for body in all_bodies:
            orjson.loads(body)
        best = min(best, time.process_time() - started)
    return best * 1e6 / (sum(map(len, all_bodies)) / 1024)


@contextmanager
def _folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def suite(sessions_per_shape: int = SESSIONS) -> dict[str, Any]:
    scripts = {shape: grown(path) for shape, path in SHAPES.items()}
    sessions = [
        (f"{shape}-{i}", shape, bodies(scripts[shape]))
        for shape in SHAPES
        for i in range(sessions_per_shape)
    ]
    results: dict[str, Any] = {
        "sessions": len(sessions),
        "turns": TURNS + 1,
        "last_request_kb": round(max(len(r[-1]) for _, _, r in sessions) / 1024),
        "loads_us_per_kb": round(loads_us_per_kb([b for _, _, r in sessions for b in r]), 2),
    }

    def plain(session: str, name: str) -> dict[str, str]:
        return {"x-session-affinity": session}

    def named(session: str, name: str) -> dict[str, str]:
        return {"x-session-affinity": session, "x-replay-trajectory": name}

    with upstream() as (up, _), _folder() as folder:
        for shape, messages in scripts.items():
            (folder / f"{shape}.json").write_text(json.dumps(messages))
        record = folder / "recorded"
        runs: list[tuple[str, AbstractContextManager[tuple[str, int]], Callable[..., Any]]] = [
            ("nginx", nginx(up), plain),
            ("libraries", libraries(up), plain),
            ("forwarded", proxy("--upstream", up), plain),
            ("scripted", proxy("--trajectory-dir", str(folder)), named),
            (
                "recorded",
                proxy("--trajectory-dir", str(folder), "--record-dir", str(record)),
                named,
            ),
        ]
        for name, started, headers in runs:
            with started as (url, pid):
                results[name] = drive(url, pid, sessions, headers)
        with proxy("--mode", "strict", "--trajectory-dir", str(record)) as (url, pid):
            results["strict"] = drive(
                url,
                pid,
                sessions,
                lambda session, name: {
                    "x-session-affinity": session,
                    "x-replay-trajectory": session,
                },
            )
    return results


def table(r: dict[str, Any]) -> str:
    loads = r["loads_us_per_kb"]
    hop = r["nginx"]["cpu_us_per_kb"]
    lines = [
        f"{r['sessions']} sessions of {r['turns']} requests (the last {r['last_request_kb']} KB), "
        f"{CONCURRENT} at a time; one orjson.loads: {loads} us/KB; nginx hop: {hop} us/KB",
        f"{'path':>10} {'MB':>7} {'us/KB':>7} {'x loads':>8} {'x nginx':>8} {'ms/req':>7} "
        f"{'p50 ms':>7} {'p99 ms':>7} {'errors':>6}",
    ]
    for name in PATHS:
        m = r[name]
        lines.append(
            f"{name:>10} {m['mb']:>7} {m['cpu_us_per_kb']:>7} {m['cpu_us_per_kb'] / loads:>7.1f}x "
            f"{m['cpu_us_per_kb'] / hop:>7.1f}x {m['cpu_ms_per_request']:>7} {m['p50_ms']:>7} "
            f"{m['p99_ms']:>7} {m['error_count']:>6}"
        )
    lines.append("growth: CPU ms per request against the request's size (KB), by quarter of turns")
    for name in PATHS:
        points = ", ".join(
            f"{p['kb_per_request']:.0f} KB: {p['cpu_ms_per_request']:.2f}"
            for p in r[name]["phases"]
        )
        lines.append(f"{name:>10}  {points}")
    return "\n".join(lines)


def targets(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """The cost issue's: a long session's CPU per KB at most three times one orjson.loads, and
    the proxy's own (over uvicorn and aiohttp alone) at most twice."""
    loads = r["loads_us_per_kb"]
    floor = r["libraries"]["cpu_us_per_kb"]
    rows = []
    for name in PATHS[2:]:
        ratio = r[name]["cpu_us_per_kb"] / loads
        own = (r[name]["cpu_us_per_kb"] - floor) / loads
        ok = r[name]["error_count"] == 0
        rows.append(
            (
                f"a long session, {name}: CPU per KB vs one orjson.loads",
                f"{ratio:.1f}x",
                "<= 3x",
                ratio <= 3 and ok,
            )
        )
        rows.append(
            (
                f"a long session, {name}: CPU per KB over uvicorn and aiohttp alone, vs loads",
                f"{own:.1f}x",
                "<= 2x",
                own <= 2 and ok,
            )
        )
    return rows
