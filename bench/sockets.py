"""A scripted session over the Responses API's WebSocket against the same session over HTTP.

One session is TURNS scripted tool turns whose results are RESULT_BYTES each, so its last request
holds about 100 KB of conversation, as late turns of real runs do. Over HTTP every turn posts the
whole conversation (streamed); over a socket, as Codex does, the first frame holds the task and
every later one only the new tool result and the `previous_response_id` of the last answer. The
figures: the proxy's CPU time per turn, each client's wall time per turn, and the bytes the client
sent per session: wall times are the median of SESSIONS sessions, CPU their mean.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

import httpx
from websockets.sync.client import connect

from bench.procs import cpu_seconds, proxy

TURNS = 40
RESULT_BYTES = 2500
SESSIONS = 10
TOOLS = [{"type": "function", "name": "bash", "parameters": {"type": "object"}}]
TASK = [{"role": "user", "content": [{"type": "input_text", "text": "Run the steps."}]}]


def script() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Run the steps."}]
    for k in range(TURNS):
        arguments = json.dumps({"command": f"echo step {k}"})
        call = {"id": f"call_{k}", "type": "function",
                "function": {"name": "bash", "arguments": arguments}}  # fmt: skip
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{k}", "content": output(k)})
    return messages


def output(k: int) -> str:
    return (f"step {k} " * RESULT_BYTES)[:RESULT_BYTES]


def _events(lines: Any) -> dict[str, Any]:
    """The response.completed event's response, from an SSE stream's lines."""
    for line in lines:
        if line.startswith("data: ") and '"response.completed"' in line[:60]:
            completed: dict[str, Any] = json.loads(line[6:])["response"]
            return completed
    raise RuntimeError("the stream ended without response.completed")


def over_http(url: str, session: str) -> int:
    sent = 0
    items: list[Any] = list(TASK)
    with httpx.Client(timeout=60) as client:
        for k in range(TURNS):
            body = json.dumps({"model": "m", "input": items, "tools": TOOLS, "stream": True})
            sent += len(body)
            headers = {"x-session-affinity": session, "x-replay-trajectory": "session",
                       "content-type": "application/json"}  # fmt: skip
            with client.stream("POST", url + "/responses", content=body, headers=headers) as r:
                assert r.status_code == 200, r.read()[:300]
                response = _events(r.iter_lines())
            items += response["output"]
            items.append({"type": "function_call_output", "call_id": f"call_{k}",
                          "output": output(k)})  # fmt: skip
    return sent


def over_socket(url: str, session: str) -> int:
    sent = 0
    root = url.removesuffix("/v1").replace("http://", "ws://")
    headers = {"x-session-affinity": session, "x-replay-trajectory": "session"}
    with connect(root + "/v1/responses", additional_headers=headers, max_size=None) as sock:
        frame: dict[str, Any] = {"type": "response.create", "model": "m", "input": TASK,
                                 "tools": TOOLS}  # fmt: skip
        for k in range(TURNS):
            text = json.dumps(frame)
            sent += len(text)
            sock.send(text)
            while (event := json.loads(sock.recv(timeout=60)))["type"] != "response.completed":
                assert event["type"] != "error", event
            frame = {"type": "response.create", "model": "m", "tools": TOOLS,
                     "previous_response_id": event["response"]["id"],
                     "input": [{"type": "function_call_output", "call_id": f"call_{k}",
                                "output": output(k)}]}  # fmt: skip
    return sent


def suite() -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "session.json").write_text(json.dumps(script()))
        flags = ("--trajectory-dir", folder, "--open-binding")
        for name, run in (("http", over_http), ("websocket", over_socket)):
            with proxy(*flags) as (url, pid):
                run(url, "warm-up")
                wall, sent = [], 0
                before = cpu_seconds(pid)  # over all sessions: the clock ticks every 10 ms
                for n in range(SESSIONS):
                    started = time.perf_counter()
                    sent = run(url, f"{name}-{n}")
                    wall.append((time.perf_counter() - started) / TURNS)
                cpu = (cpu_seconds(pid) - before) / (TURNS * SESSIONS)
                results[name] = {
                    "proxy_cpu_ms_per_turn": round(cpu * 1000, 2),
                    "wall_ms_per_turn": round(median(wall) * 1000, 2),
                    "client_bytes_per_session": sent,
                }
    results["last_request_kb"] = round(
        len(json.dumps(script())) / 1024  # about what the last HTTP request holds
    )
    return results


def table(r: dict[str, Any]) -> str:
    lines = [
        f"a {TURNS}-turn scripted session, last request about {r['last_request_kb']} KB "
        f"({SESSIONS} sessions each)",
        f"{'':>10} {'proxy CPU ms/turn':>18} {'wall ms/turn':>13} {'client bytes sent':>18}",
    ]
    for name in ("http", "websocket"):
        x = r[name]
        lines.append(
            f"{name:>10} {x['proxy_cpu_ms_per_turn']:>18} {x['wall_ms_per_turn']:>13} "
            f"{x['client_bytes_per_session']:>18}"
        )
    return "\n".join(lines)
