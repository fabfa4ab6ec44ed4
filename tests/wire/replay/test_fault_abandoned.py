"""A client that leaves while a fault keeps it waiting (delay, stall): the proxy lets go at once,
sends nothing more, records no answer, and serves the next request as usual. Over real sockets: a
raw client sends the scripted request, waits until the proxy holds it, then closes its side.

(That a client who waits gets the delayed or stalled answer whole is
test_fault_injection.test_a_stalled_or_delayed_answer_still_arrives_whole.)
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.agent import RECORDED, TOOLS, agent_step, client, start_messages

DEADLINE = 30.0  # seconds: a bound on polling, never a wait that the test relies on


def _poll(what: str, ready: Callable[[], Any]) -> Any:
    """`ready()` once it is truthy; fails the test when it never is."""
    end = time.monotonic() + DEADLINE
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"never happened within {DEADLINE:g} s: {what}")
        time.sleep(0.01)  # between polls only


def _tasks(root: str) -> int:
    answer = httpx.get(root + "/healthz")
    answer.raise_for_status()
    tasks: int = answer.json()["tasks"]
    return tasks


def _injected(root: str, session: str) -> list[str]:
    answer = httpx.get(f"{root}/replay/sessions/{session}")
    if answer.status_code == 404:  # not seen yet
        return []
    answer.raise_for_status()
    return [i["kind"] for i in answer.json()["faults"]["injected"]]


def _request(host: str, session: str, *, stream: bool) -> bytes:
    body = json.dumps(
        {"model": "gpt-test", "messages": start_messages(), "tools": TOOLS, "stream": stream}
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"x-session-affinity: {session}\r\n\r\n"
    )
    return head.encode() + body


def _until_eof(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["delay", "stall"])
def test_a_client_that_leaves_a_waiting_fault_is_let_go_at_once(
    proxy: ProxyFactory,
    write_trajectory: Callable[..., Path],
    tmp_path: Path,
    kind: str,
    stream: bool,
) -> None:
    records = tmp_path / "records"
    session = f"gone-{kind}-{'stream' if stream else 'json'}"
    with proxy(trajectory=[write_trajectory(RECORDED)], record_dir=records) as url:
        root = url.removesuffix("/v1")
        host = root.removeprefix("http://")
        # a stalled stream first, elsewhere: sse-starlette (which paces stalled streams) starts
        # its lasting shutdown watcher
        warm_plan = [{"turn": 1, "kind": "stall", "seconds": 0.01}]
        put = httpx.put(f"{root}/replay/sessions/warm-up/faults", json=warm_plan)
        assert put.status_code == 200, put.text
        warm = client(url, **{"x-session-affinity": "warm-up"})
        agent_step(warm, start_messages(), stream=True)
        warm.close()
        baseline = _tasks(root)
        plan = [{"turn": 1, "kind": kind, "seconds": 3600}]
        put = httpx.put(f"{root}/replay/sessions/{session}/faults", json=plan)
        assert put.status_code == 200, put.text

        address = host.split(":")
        with socket.create_connection((address[0], int(address[1])), timeout=DEADLINE) as sock:
            sock.sendall(_request(host, session, stream=stream))
            # the proxy has read the request and holds it, for an hour
            _poll("the fault was injected", lambda: _injected(root, session) == [f"{kind}:3600"])
            assert _tasks(root) > baseline
            sock.shutdown(socket.SHUT_WR)  # the client leaves (uvicorn: a disconnect)
            received = _until_eof(sock)  # the proxy closed its side of the socket
        _poll("the proxy let go of the request", lambda: _tasks(root) <= baseline)

        # the fault fired once: the retry of the same session gets the turn, whole
        message, headers = agent_step(
            client(url, **{"x-session-affinity": session}), start_messages(), stream=stream
        )
        assert _tasks(root) <= baseline

    # nothing more was sent after the client left: no answer, or only what came before the stall
    if kind == "delay":
        assert received == b""
    else:
        head, _, after = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b"x-replay-fault: stall:3600" in head
        assert b"call_A" not in after  # a JSON stall sent its headers; a stream, its first event
        if stream:
            assert after.count(b"data: ") == 1
    assert headers["x-replay-source"] == "scripted" and headers["x-replay-turn"] == "1/2"
    assert message["tool_calls"][0]["id"] == "call_A" and message["finish"] == "tool_calls"
    # the abandoned answer was never delivered: only the retry is recorded
    lines = [json.loads(line) for line in (records / f"{session}.jsonl").read_text().splitlines()]
    assert len(lines) == 1, lines
