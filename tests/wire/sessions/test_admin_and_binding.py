"""Which script a session gets, and the admin API that shows and sets it, over real sockets."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]


def recording(task: str, *ids: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for call_id in ids:
        args = json.dumps({"command": f"echo {call_id}"})
        messages.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "bash", "arguments": args},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": "ok"})
    return messages


def ask(url: str, session: str | None, task: str = "the task", **headers: str) -> httpx.Response:
    if session is not None:
        headers["x-session-affinity"] = session
    body = {"model": "m", "messages": [{"role": "user", "content": task}], "tools": TOOLS}
    return httpx.post(url + "/chat/completions", json=body, headers=headers)


def first_call_id(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    call_id: str = response.json()["choices"][0]["message"]["tool_calls"][0]["id"]
    return call_id


def admin(url: str) -> str:
    return url.removesuffix("/v1") + "/replay/sessions"


def test_unclaimed_trajectories_go_to_sessions_in_order_one_each(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    a = write_trajectory(recording("recorded task A", "a1"), name="a")
    b = write_trajectory(recording("recorded task B", "b1"), name="b")
    with proxy(upstream=upstream_url, trajectory=[a, b]) as url:
        assert first_call_id(ask(url, "s1")) == "a1"
        assert first_call_id(ask(url, "s2")) == "b1"
        assert first_call_id(ask(url, "s1")) == "a1"  # the binding sticks
        third = ask(url, "s3")
        assert third.headers["x-replay-source"] == "upstream"
        sessions = {s["session"]: s for s in httpx.get(admin(url)).json()["data"]}
    assert sessions["s1"]["script"]["bound_by"] == "unclaimed"
    assert sessions["s1"]["script"]["task_match"] is False  # reported, not hidden
    assert sessions["s3"]["phase"] == "unscripted"
    assert sessions["s3"]["script"] is None and sessions["s3"]["forwarded"]["main"] == 1


def test_task_match_wins_over_order(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    a = write_trajectory(recording("task A", "a1"), name="a")
    b = write_trajectory(recording("task B", "b1"), name="b")
    with proxy(upstream=upstream_url, trajectory=[a, b]) as url:
        assert first_call_id(ask(url, "s1", task="task B")) == "b1"
        status = httpx.get(admin(url) + "/s1").json()
    assert (
        status["script"] | {"name": "b", "bound_by": "task", "task_match": True} == status["script"]
    )


def test_x_replay_trajectory_names_a_file_in_the_trajectory_dir(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
    tmp_path: Path,
) -> None:
    _, upstream_url = upstream
    folder = tmp_path / "trajs"
    write_trajectory(recording("t", "x1"), name="run-7", folder=folder)
    with proxy(upstream=upstream_url, trajectory_dir=folder, bind_on_task=True) as url:
        # a file added after start-up is found too
        (folder / "late.jsonl").write_text(
            "\n".join(json.dumps(m) for m in recording("t", "late1"))
        )
        assert first_call_id(ask(url, "s1", **{"x-replay-trajectory": "run-7"})) == "x1"
        assert first_call_id(ask(url, "s2", **{"x-replay-trajectory": "late"})) == "late1"
        missing = ask(url, "s3", **{"x-replay-trajectory": "nope"})
        bad = ask(url, "s4", **{"x-replay-trajectory": "../etc/passwd"})
    assert (
        missing.status_code == 404
        and "no trajectory named 'nope'" in missing.json()["error"]["message"]
    )
    assert missing.headers["x-should-retry"] == "false"
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "x-replay-trajectory"


def test_admin_put_get_delete(proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]) -> None:
    _, upstream_url = upstream
    with proxy(upstream=upstream_url) as url:
        put = httpx.put(
            admin(url) + "/job-1", content=json.dumps(recording("the task", "p1", "p2"))
        )
        assert put.status_code == 200
        assert (
            put.json()["script"]["bound_by"] == "admin" and put.json()["script"]["turns_total"] == 2
        )
        assert first_call_id(ask(url, "job-1")) == "p1"

        # a bad trajectory is refused with the reason, and the old script stays
        bad = httpx.put(
            admin(url) + "/job-1",
            content=b'[{"role": "user", "content": "t"}, {"role": "assistant", "tool_calls": [{"function": {"name": "bash", "arguments": "{oops"}}]}]',
        )
        assert bad.status_code == 400
        assert (
            "admin:job-1:1: tool_calls[0].function.arguments is not valid JSON"
            in bad.json()["error"]["message"]
        )
        assert first_call_id(ask(url, "job-1")) == "p1"

        status = httpx.get(admin(url) + "/job-1").json()
        assert status["script"]["task_match"] is True and status["turns_served"] == 1
        assert [s["session"] for s in httpx.get(admin(url)).json()["data"]] == ["job-1"]

        assert httpx.delete(admin(url) + "/job-1").status_code == 204
        assert httpx.get(admin(url) + "/job-1").status_code == 404
        assert httpx.delete(admin(url) + "/job-1").status_code == 404
        assert httpx.put(admin(url) + "/bad%2Fname", content=b"[]").status_code in (400, 404)
        assert (
            httpx.put(admin(url) + "/ok-name", content=b"")
            .json()["error"]["message"]
            .endswith("the file is empty")
        )


def test_admin_token_is_required_when_set(proxy: ProxyFactory) -> None:
    with proxy(admin_token="s3cret-Lm5Np8Qr2T") as url:
        assert httpx.get(admin(url)).status_code == 401
        assert httpx.get(admin(url), headers={"authorization": "Bearer wrong"}).status_code == 401
        ok = httpx.get(admin(url), headers={"authorization": "Bearer s3cret-Lm5Np8Qr2T"})
        assert ok.status_code == 200
        assert ok.json() == {"object": "list", "data": [], "has_more": False, "next_cursor": None}
        unauthorized = httpx.get(admin(url))
    assert "s3cret-Lm5Np8Qr2T" not in unauthorized.text
    assert unauthorized.json()["error"]["type"] == "authentication_error"


def test_health_and_probe(proxy: ProxyFactory, write_trajectory: Callable[..., Path]) -> None:
    with proxy(trajectory=[write_trajectory(recording("t", "x"))]) as url:
        root = url.removesuffix("/v1")
        health = httpx.get(root + "/healthz").json()
        assert health | {"tasks": 0} == {
            "status": "ok",
            "trajectories": 1,
            "upstream": None,
            "upstream_connections": {"open": 0, "idle": 0},
            "tasks": 0,
            "trajectory_cache": {
                "entries": 0,
                "bytes": 0,
                "limit": 256 * 1024 * 1024,
                "evicted": 0,
            },
        }
        assert health["tasks"] >= 1
        assert httpx.head(root + "/").status_code == 200
        unknown = httpx.get(root + "/nowhere")
    assert (
        unknown.status_code == 404 and unknown.json()["error"]["message"] == "no route GET /nowhere"
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[1, 2]", None),
        (b'{"model": "m"}', "messages"),
        (b'{"messages": [{"role": "user", "content": 7}]}', "messages[0].content"),
    ],
)
def test_bad_requests_are_openai_shaped_400s(
    proxy: ProxyFactory, body: bytes, param: str | None
) -> None:
    with proxy() as url:
        r = httpx.post(
            url + "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
    assert r.status_code == 400
    assert (
        r.json()["error"]["type"] == "invalid_request_error" and r.json()["error"]["param"] == param
    )


def test_a_script_with_a_number_no_run_records_is_refused_and_the_old_one_stays(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    _, upstream_url = upstream
    good = recording("the task", "good_1")
    bad = recording("the task", "bad_1")
    bad[1]["usage"] = {"prompt_tokens": 2**64 - 1, "completion_tokens": 2**64 - 1}
    with proxy(upstream=upstream_url) as url:
        assert httpx.put(admin(url) + "/s1", json=good).status_code == 200
        refused = httpx.put(admin(url) + "/s1", content=json.dumps(bad))
        served = ask(url, "s1")
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert "the old script stays" in message and ":1: a token count is" in message
    assert first_call_id(served) == "good_1"
