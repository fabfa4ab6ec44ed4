"""Side by side, against one fast fake upstream, with wrk as the client:

    direct      wrk -> upstream
    nginx       wrk -> nginx (1 worker, proxy_buffering off) -> upstream        reference for forwarding
    forwarded   wrk -> replay-proxy (a session with no script: the live path) -> upstream
    scripted    wrk -> replay-proxy answering a scripted turn
    bare        wrk -> FastAPI returning the same JSON bytes, or the same events
                       through sse-starlette's EventSourceResponse                 reference for scripted

each at concurrency 1, 8 and 64, streaming (64 chunks) and not. Also the time to the first chunk
of a forwarded stream at concurrency 1, direct and through the proxy (an asyncio client).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import httpx

from bench import procs, wrk

TASK = "Benchmark the replay proxy."
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
# the scripted turn: a text and one tool call, what every scripted scenario (and peer) serves
SAID = "Let me look at the files first."
CALL_ID, CALL_NAME, CALL_ARGUMENTS = "call_bench_1", "bash", '{"command": "ls -la"}'
CONCURRENCY = (1, 8, 64)


def request(stream: bool) -> bytes:
    body: dict[str, Any] = {
        "model": "bench",
        "messages": [{"role": "user", "content": TASK}],
        "tools": TOOLS,
    }
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":")).encode()


def trajectory(path: Path) -> None:
    """One scripted turn with some text and a tool call: what the scripted scenario serves."""
    call = {
        "id": CALL_ID,
        "type": "function",
        "function": {"name": CALL_NAME, "arguments": CALL_ARGUMENTS},
    }
    messages = [
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": SAID, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": CALL_ID, "content": "a b c"},
    ]
    path.write_text(json.dumps(messages))


def measure(url: str, pid: int, stream: bool, concurrency: int, seconds: float) -> dict[str, Any]:
    before = procs.cpu_seconds(pid)
    result = wrk.run(
        url + "/chat/completions",
        request(stream),
        connections=concurrency,
        seconds=seconds,
        headers={"x-session-affinity": "bench"},
    )
    cpu = procs.cpu_seconds(pid) - before
    result["cpu_ms_per_request"] = round(cpu * 1000 / max(result["requests"], 1), 4)
    return result


async def _ttfb(url: str, n: int) -> list[float]:
    """Seconds from sending a streaming request to its first body byte, one at a time."""
    host, port = url.removeprefix("http://").split("/", 1)[0].split(":")
    body = request(True)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    found = []
    for _ in range(n):
        sent = time.perf_counter()
        writer.write(head + body)
        data = await reader.readuntil(b"\r\n\r\n")  # headers
        first = await reader.read(1)
        found.append(time.perf_counter() - sent)
        assert data.startswith(b"HTTP/1.1 200") and first
        rest = b""
        while not rest.endswith(b"0\r\n\r\n"):  # read the rest of the chunked body
            rest += await reader.read(65536)
    writer.close()
    return found


def ttfb(url: str, n: int = 400) -> float:
    values = asyncio.run(_ttfb(url, n))
    return round(median(values[n // 10 :]) * 1000, 4)  # ms; the first tenth warms up


def _sweep(out: dict[str, Any], name: str, url: str, pid: int, seconds: float) -> None:
    """One scenario at every concurrency, JSON and streaming."""
    for stream in (False, True):
        for c in CONCURRENCY:
            out[f"{name}/{_kind(stream)}/c{c}"] = measure(url, pid, stream, c, seconds)


def run_once(seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        traj = folder / "bench.json"
        trajectory(traj)
        with procs.upstream(chunks=64) as (up, up_pid):
            with procs.proxy("--trajectory", str(traj)) as (scripted, scripted_pid):
                answer_json = _fetch(scripted, False)
                answer_sse = _fetch(scripted, True)
                _sweep(out, "scripted", scripted, scripted_pid, seconds)
            (folder / "a.json").write_bytes(answer_json)
            (folder / "a.sse").write_bytes(answer_sse)
            with procs.process(
                sys.executable,
                "-m",
                "bench.reference",
                "--json",
                str(folder / "a.json"),
                "--events",
                str(folder / "a.sse"),
            ) as (bare, bare_pid):
                _sweep(out, "bare", bare, bare_pid, seconds)
            _sweep(out, "direct", up, up_pid, seconds)
            with procs.nginx(up) as (ngx, ngx_pid):
                _sweep(out, "nginx", ngx, ngx_pid, seconds)
            with procs.proxy("--upstream", up) as (fwd, fwd_pid):
                _sweep(out, "forwarded", fwd, fwd_pid, seconds)
                out["ttfb_ms/forwarded"] = ttfb(fwd)
            out["ttfb_ms/direct"] = ttfb(up)
    return out


def _kind(stream: bool) -> str:
    return "stream" if stream else "json"


def _fetch(url: str, stream: bool) -> bytes:
    r = httpx.post(
        url + "/chat/completions",
        content=request(stream),
        headers={"content-type": "application/json", "x-session-affinity": "bench"},
    )
    r.raise_for_status()
    return r.content


REFERENCE = {"direct": None, "nginx": None, "forwarded": "nginx", "scripted": "bare", "bare": None}


def table(results: dict[str, Any]) -> str:
    """requests/s and CPU ms per request of each scenario, with its ratio to its reference."""
    lines = ["throughput (requests/s; ratio to the reference; CPU ms per request of the server)"]
    lines.append(f"  {'scenario':<22}" + "".join(f"{f'c={c}':>26}" for c in CONCURRENCY))
    for target, reference in REFERENCE.items():
        for kind in ("json", "stream"):
            cells = []
            for c in CONCURRENCY:
                r = results[f"{target}/{kind}/c{c}"]
                ratio = (
                    f" {r['rps'] / results[f'{reference}/{kind}/c{c}']['rps']:.2f}x"
                    if reference
                    else ""
                )
                cells.append(f"{r['rps']:>9.0f}{ratio:>7} {r['cpu_ms_per_request']:>7.3f}ms")
            lines.append(f"  {target + ' ' + kind:<22}" + "".join(f"{cell:>26}" for cell in cells))
    lines.append(
        f"  time to first chunk at c=1: direct {results['ttfb_ms/direct']:.2f} ms, forwarded {results['ttfb_ms/forwarded']:.2f} ms"
    )
    return "\n".join(lines)
