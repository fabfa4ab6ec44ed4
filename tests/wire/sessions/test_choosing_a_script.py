"""Choosing a session's script decides which commands its harness runs, so a request may choose
or branch one (x-replay-trajectory, /s/{session}/t/{name}/, x-replay-turns, /k/{K}/) only with the admin
token in x-replay-token, unless the operator opens it (--open-binding, or no token at all with
--insecure-admin); and no client can step into the session of a client that sends no session id
(the proxy's fingerprints, fp-...). Over real sockets, in each API's own error shape, and with
nothing bound or sent upstream by a refused request."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream
from tests.wire.sessions.test_admin_and_binding import TOOLS, admin, first_call_id, recording

TOKEN = "binding-token-4Hx9Qm2Zp7"
EVIL = recording("the task", "call_evil")  # a script the attacker would like the victim to run
CHAT = {"model": "m", "messages": [{"role": "user", "content": "the task"}], "tools": TOOLS}


def _proxy(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path], upstream: str, **settings: Any
) -> Any:
    folder = write_trajectory(EVIL, name="evil").parent
    return proxy(upstream=upstream, trajectory_dir=folder, **settings)


@pytest.mark.parametrize(
    ("how", "path", "headers"),
    [
        ("header", "/v1/chat/completions", {"x-replay-trajectory": "evil"}),
        ("path", "/s/victim/t/evil/v1/chat/completions", {}),
        ("branch", "/v1/chat/completions", {"x-replay-turns": "0"}),
        ("path-branch", "/s/victim/k/0/v1/chat/completions", {}),
        ("path-both", "/s/victim/t/evil/k/1/v1/chat/completions", {}),
    ],
)
def test_a_request_without_the_token_cannot_choose_or_branch_a_script(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
    how: str,
    path: str,
    headers: dict[str, str],
) -> None:
    fake, upstream_url = upstream
    with _proxy(proxy, write_trajectory, upstream_url, admin_token=TOKEN) as url:
        root = url.removesuffix("/v1")
        sent = {"x-session-affinity": "victim", **headers}
        refused = httpx.post(root + path, json=CHAT, headers=sent)
        wrong = httpx.post(root + path, json=CHAT, headers={**sent, "x-replay-token": "nope"})
        victim = httpx.get(admin(url) + "/victim", headers={"authorization": f"Bearer {TOKEN}"})
    for answer in (refused, wrong):
        assert answer.status_code == 401, answer.text
        error = answer.json()["error"]
        assert error["code"] == "invalid_admin_token" and error["param"] == "x-replay-token"
        assert "x-replay-token" in error["message"] and "--open-binding" in error["message"]
        assert answer.headers["x-should-retry"] == "false"
    assert victim.status_code == 404  # nothing was bound: the session was never even made
    assert fake.requests == []


def test_with_the_token_a_runner_chooses_and_branches(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    with _proxy(proxy, write_trajectory, upstream_url, admin_token=TOKEN) as url:
        root = url.removesuffix("/v1")
        named = httpx.post(
            url + "/chat/completions",
            json=CHAT,
            headers={
                "x-session-affinity": "s1",
                "x-replay-trajectory": "evil",
                "x-replay-token": TOKEN,
            },
        )
        by_path = httpx.post(
            root + "/s/s2/t/evil/v1/chat/completions", json=CHAT, headers={"x-replay-token": TOKEN}
        )
        branched = httpx.post(
            url + "/chat/completions",
            json=CHAT,
            headers={"x-session-affinity": "s3", "x-replay-turns": "0", "x-replay-token": TOKEN},
        )
    assert first_call_id(named) == "call_evil" and first_call_id(by_path) == "call_evil"
    assert branched.status_code == 200 and branched.headers["x-replay-source"] == "upstream"


@pytest.mark.parametrize("settings", [{"admin_token": TOKEN, "open_binding": True}, {}])
def test_an_operator_may_leave_the_choice_open(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
    settings: dict[str, Any],
) -> None:
    """--open-binding, or a proxy with no admin token at all (--insecure-admin, the fixture's
    default), lets a runner that can set only a base URL choose by path."""
    _, upstream_url = upstream
    with _proxy(proxy, write_trajectory, upstream_url, **settings) as url:
        root = url.removesuffix("/v1")
        answer = httpx.post(root + "/s/s1/t/evil/v1/chat/completions", json=CHAT)
    assert first_call_id(answer) == "call_evil"


def test_a_refusal_is_in_the_shape_of_the_api_asked(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "the task"}]}
    with _proxy(proxy, write_trajectory, upstream_url, admin_token=TOKEN) as url:
        answer = httpx.post(url + "/messages", json=body, headers={"x-replay-trajectory": "evil"})
    assert answer.status_code == 401
    assert answer.json()["type"] == "error"  # Anthropic's shape
    assert answer.json()["error"]["type"] == "authentication_error"


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/v1/chat/completions", {"x-session-affinity": "fp-0123456789abcdef01234567"}),
        ("/s/fp-0123456789abcdef01234567/v1/chat/completions", {}),
    ],
)
def test_no_client_can_claim_a_fingerprint_session(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
    path: str,
    headers: dict[str, str],
) -> None:
    fake, upstream_url = upstream
    with _proxy(proxy, write_trajectory, upstream_url) as url:
        root = url.removesuffix("/v1")
        refused = httpx.post(root + path, json=CHAT, headers=headers)
        sessions = httpx.get(admin(url)).json()["data"]
    assert refused.status_code == 400
    assert "fingerprint" in refused.json()["error"]["message"]
    assert sessions == [] and fake.requests == []


def test_a_client_without_a_session_id_still_gets_its_fingerprint(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    task = write_trajectory(recording("the task", "call_1"), name="mine")
    with proxy(upstream=upstream_url, trajectory=[task], admin_token=TOKEN) as url:
        answer = httpx.post(url + "/chat/completions", content=json.dumps(CHAT),
                            headers={"content-type": "application/json"})  # fmt: skip
    assert first_call_id(answer) == "call_1"
    assert answer.headers["x-replay-session"].startswith("fp-")
