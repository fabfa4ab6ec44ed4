"""Behind the documented nginx block, as written, in front of the proxy: nobody who reaches nginx
can swap a script or, by a name of their own, spend the operator's key. Every request nginx
forwards comes from 127.0.0.1, so none of this may rest on where a request comes from."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.conftest import ROOT
from tests.helpers.agent import RECORDED, SYSTEM, TASK, agent_step, client, start_messages
from tests.helpers.nginx import documented_block, nginx_in_front
from tests.helpers.servers import FakeUpstream, running, status
from tests.wire.test_cross_site import EVIL

KEY = "sk-operator-key-0123456789"
AGENTS = "replay.internal.example"  # the name the operator lists for its agents
FOREIGN = "rebind.attacker.example"
RESPONSES_BASH = {"type": "function", "name": "bash", "parameters": {"type": "object"}}


@pytest.fixture
def fronted(write_trajectory: Callable[..., Path], tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """fronted(*flags) -> (nginx's root URL, the fake upstream, the proxy's root URL): nginx
    with the documented block in front of `replay-proxy serve` with its defaults and `flags`."""
    stack: list[Any] = []

    def start(*flags: str) -> tuple[str, FakeUpstream, str]:
        fake = FakeUpstream()
        fake.then(status(200, {"object": "list", "data": []}))
        up = running(fake.app)
        upstream_root = up.__enter__()
        stack.append(up)
        served = serve(
            "--trajectory", str(write_trajectory(RECORDED)),
            "--upstream", upstream_root + "/v1",
            "--upstream-api-key", KEY,
            "--allowed-host", AGENTS,
            "--admin-token-file", str(tmp_path / "token"),
            *flags,
        )  # fmt: skip
        proxy_root = served.__enter__()
        stack.append(served)
        front = nginx_in_front(documented_block(), int(proxy_root.rsplit(":", 1)[1]))
        nginx_root = front.__enter__()
        stack.append(front)
        return nginx_root, fake, proxy_root

    yield start
    for context in reversed(stack):
        context.__exit__(None, None, None)


@contextmanager
def serve(*flags: str) -> Iterator[str]:
    """`replay-proxy serve --port 0 FLAGS`; yields its root URL once it listens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", "--log-level", "warning", *flags],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # written once the socket is bound
        assert "listening on " in line, line
        yield line.rsplit("listening on ", 1)[1].strip().removesuffix("/v1")
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_nobody_who_reaches_nginx_can_swap_a_script(
    fronted: Callable[..., Any], tmp_path: Path
) -> None:
    front, _, _ = fronted()  # no --admin-token: serve makes one
    token = (tmp_path / "token").read_text().strip()
    put = httpx.put(
        front + "/replay/sessions/s1",
        content=json.dumps(EVIL),
        headers={"host": FOREIGN, "content-type": "application/json"},
        timeout=30,
    )
    as_local = httpx.put(  # a person (not a page) names whatever host they like
        front + "/replay/sessions/s1",
        content=json.dumps(EVIL),
        headers={"host": "127.0.0.1", "content-type": "application/json"},
        timeout=30,
    )
    with_token = httpx.get(
        front + "/replay/sessions",
        headers={"host": "127.0.0.1", "authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert put.status_code == 401 and as_local.status_code == 401
    assert with_token.status_code == 200 and with_token.json()["data"] == []  # nothing was set


def test_an_admin_api_opened_without_a_token_refuses_what_came_through_a_front(
    fronted: Callable[..., Any],
) -> None:
    front, _, proxy_root = fronted("--insecure-admin")
    put = httpx.put(
        front + "/replay/sessions/s1",
        content=json.dumps(EVIL),
        headers={"host": "127.0.0.1", "content-type": "application/json"},
        timeout=30,
    )
    direct = httpx.get(proxy_root + "/replay/sessions", timeout=30)
    assert put.status_code == 403
    error = put.json()["error"]
    assert error["code"] == "cross_site_refused" and error["param"] == "x-forwarded-for"
    assert "reverse proxy" in error["message"]
    assert direct.status_code == 200 and direct.json()["data"] == []


def test_a_foreign_name_through_nginx_does_not_get_the_operators_key(
    fronted: Callable[..., Any],
) -> None:
    front, fake, _ = fronted()
    refused = httpx.get(front + "/v1/files", headers={"host": FOREIGN}, timeout=30)
    assert refused.status_code == 403
    assert (
        refused.json()["error"]["param"] == "host" and FOREIGN in refused.json()["error"]["message"]
    )
    assert fake.requests == []  # nothing went upstream
    listed = httpx.get(front + "/v1/files", headers={"host": AGENTS}, timeout=30)
    assert listed.status_code == 200
    assert [r.path for r in fake.requests] == ["/v1/files"]
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_agents_are_served_through_the_documented_block(fronted: Callable[..., Any]) -> None:
    front, _, _ = fronted()
    c = client(front + "/v1", **{"x-session-affinity": "agent-1", "host": AGENTS})
    answer, headers = agent_step(c, start_messages(), stream=True)
    assert headers["x-replay-turn"] == "1/2" and answer["tool_calls"]


def test_a_websocket_goes_through_the_documented_block(fronted: Callable[..., Any]) -> None:
    """Codex and opencode open a WebSocket first: the block passes the upgrade on."""
    front, _, _ = fronted()
    frame = {"type": "response.create", "model": "m", "input": [{"role": "user", "content": TASK}],
             "instructions": SYSTEM, "tools": [RESPONSES_BASH]}  # fmt: skip
    port = int(front.rsplit(":", 1)[1])
    tcp = socket.create_connection(("127.0.0.1", port))  # by the agents' name, as they address it
    url = f"ws://{AGENTS}:{port}/v1/responses"
    headers = {"x-session-affinity": "agent-ws"}
    with connect(url, sock=tcp, additional_headers=headers) as sock:
        sock.send(json.dumps(frame))
        while (event := json.loads(sock.recv(timeout=30)))["type"] != "response.completed":
            assert event["type"] != "error", event
    assert [i["type"] for i in event["response"]["output"]] == [
        "reasoning",
        "message",
        "function_call",
    ]
