"""Running it: metrics, structured logs, the status page, graceful shutdown, the testing helper,
and who may use the admin API."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.testing import ReplayProxy
from tests.conftest import ROOT, ProxyFactory
from tests.helpers.agent import RECORDED, TOOLS, agent_step, client, follow, start_messages
from tests.helpers.load import metric, proxy_process
from tests.helpers.servers import FakeUpstream, Gate, running, status


def test_metrics_count_answers_by_source_and_time_the_upstream(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    fake.then(status(429, {"error": {"message": "slow down"}}))
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = client(url, **{"x-session-affinity": "m1"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=True)
        follow(messages, first)
        agent_step(c, messages, stream=False)
        httpx.post(
            url + "/chat/completions",
            json={"model": "m", "messages": start_messages()},
            headers={"x-session-affinity": "m1"},
        )
        httpx.post(
            url + "/chat/completions",
            content=b"{broken",
            headers={"content-type": "application/json"},
        )
        bad = [
            *start_messages(),
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "nope",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "{}"},
                    }
                ],
            },
        ]
        httpx.post(
            url + "/chat/completions",
            json={"model": "m", "messages": bad, "tools": TOOLS},
            headers={"x-session-affinity": "m1"},
        )
        # an OpenAI path that happens to end in /messages: an OpenAI-shaped error, api "other"
        refused = httpx.post(
            url + "/threads/t1/messages", json={}, headers={"x-session-affinity": "not valid!"}
        )
        text = httpx.get(url.removesuffix("/v1") + "/metrics").text
    assert refused.status_code == 400
    assert refused.json()["error"]["type"] == "invalid_request_error"
    assert "type" not in refused.json()  # not Anthropic's {"type": "error", "error": ...}

    def requests(**labels: str) -> float:
        return metric(text, "replay_proxy_requests_total", **labels)

    assert requests(api="chat", lane="main", source="scripted", status="200") == 2
    assert requests(api="chat", lane="toolless", source="upstream", status="429") == 1
    assert requests(api="chat", lane="-", source="error", status="400") == 1
    assert requests(api="other", lane="-", source="error", status="400") == 1
    assert requests(api="chat", lane="main", source="diverged", status="404") == 1
    assert 'source="error",status="404"' not in text  # the divergence is counted once
    assert metric(text, "replay_proxy_divergences_total", kind="history", verdict="changed") == 1
    assert metric(text, "replay_proxy_upstream_seconds_count", api="chat") == 1
    assert metric(text, "replay_proxy_upstream_ttfb_seconds_count", api="chat") == 1
    assert metric(text, "replay_proxy_active_sessions") == 1
    assert "sk-client-key" not in text


def test_json_logs_one_line_per_request_without_credentials(
    upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    _, upstream_url = upstream
    log = tmp_path / "proxy.log"
    args = [
        "--trajectory",
        str(ROOT / "examples/greeting.json"),
        "--upstream",
        upstream_url,
        "--upstream-api-key",
        "sk-upstream-SECRET-1",
        "--log-format",
        "json",
        "--log-level",
        "info",
    ]
    with log.open("w") as err, proxy_process(*args, log=err) as (url, _):
        body = json.loads((ROOT / "examples/greeting.json").read_text())[:2]
        key = {"authorization": "Bearer sk-client-SECRET-2", "x-session-affinity": "log-1"}
        httpx.post(
            url + "/chat/completions",
            json={"model": "m", "messages": body, "tools": TOOLS},
            headers=key,
        )
        httpx.post(url + "/chat/completions", json={"model": "m", "messages": body}, headers=key)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    requests = [line for line in lines if line["logger"] == "proxy.requests"]
    assert [(r["session"], r["lane"], r["source"], r["turn"], r["status"]) for r in requests] == [
        ("log-1", "main", "scripted", "1/3", 200),
        ("log-1", "toolless", "upstream", "-", 200),
    ]
    assert all(isinstance(r["ms"], float) and r["api"] == "chat" for r in requests)
    assert "SECRET" not in log.read_text()


def test_sigterm_lets_the_stream_in_flight_finish_and_refuses_new_connections(
    upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    fake, upstream_url = upstream
    gate = Gate()
    fake.then(gate.answer)
    args = ("--upstream", upstream_url, "--log-level", "info")
    with proxy_process(*args, log=subprocess.PIPE) as (url, process):
        try:
            assert process.stderr is not None
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            with httpx.stream("POST", url + "/chat/completions", json=body, timeout=60) as r:
                lines = r.iter_lines()
                assert next(lines).startswith("data: ")
                process.send_signal(signal.SIGTERM)
                for line in process.stderr:  # uvicorn says when it has stopped accepting
                    if "Waiting for connections to close" in line:
                        break
                with pytest.raises(httpx.TransportError):
                    httpx.get(url.removesuffix("/v1") + "/healthz", timeout=5)
                gate.released.set()
                assert [line for line in lines if line] == [
                    "data: [DONE]"
                ]  # the stream ended whole
            # after a clean shutdown uvicorn re-raises the signal it caught, as a process should
            assert process.wait(timeout=30) == -signal.SIGTERM
        finally:
            gate.released.set()  # a failed assertion must not leave the stream hanging


def test_the_testing_helper_and_its_pytest_fixture(
    replay_proxy: Callable[..., ReplayProxy], write_trajectory: Callable[..., Path]
) -> None:
    proxy = replay_proxy(trajectories=[write_trajectory(RECORDED)], after_script="stop")
    c = client(proxy.base_url, **{"x-session-affinity": "fixture-1"})
    messages = start_messages()
    for _ in range(2):
        answer, _ = agent_step(c, messages, stream=False)
        follow(messages, answer)
    final, headers = agent_step(c, messages, stream=False)
    assert headers["x-replay-source"] == "stop" and final["finish"] == "stop"
    assert proxy.status("fixture-1")["complete"] is True
    assert [s["session"] for s in proxy.sessions()] == ["fixture-1"]
    with ReplayProxy(
        trajectories=[write_trajectory(RECORDED)], admin_token="t0k-Hq7Zp2Wn4Xc9"
    ) as other:
        assert other.sessions() == []  # the helper sends the admin token it was given


UI_TOKEN = "ui-token-Jk4Rt9Vm"


def test_the_status_page_shows_sessions_progress_and_timelines(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    with proxy(trajectory=[write_trajectory(RECORDED)], admin_token=UI_TOKEN) as url:
        root = url.removesuffix("/v1")
        c = client(url, **{"x-session-affinity": "ui-1"})
        messages = start_messages()
        agent_step(c, messages, stream=False)
        assert httpx.get(root + "/replay/ui").status_code == 401
        browser = {"accept": "text/html,application/xhtml+xml"}
        asked = httpx.get(root + "/replay/ui", headers=browser)
        # an old link with the token in its address: said, never read, no cookie
        addressed = httpx.get(root + "/replay/ui", params={"token": UI_TOKEN}, headers=browser)
        mistyped = httpx.post(root + "/replay/ui", data={"token": "x"}, headers=browser)
        home = httpx.get(root + "/")
        login = httpx.post(root + "/replay/ui", data={"token": UI_TOKEN})
        assert login.status_code == 303 and login.headers["location"] == "/replay/ui"
        page = httpx.get(root + "/replay/ui", cookies=login.cookies)
        details = httpx.get(root + "/replay/sessions/ui-1", cookies=login.cookies)  # a row's link
        forged = httpx.get(root + "/replay/ui", cookies={"replay_admin": "99999999999.00ff"})
        posted_by_a_page = httpx.post(
            root + "/replay/ui",
            data={"token": UI_TOKEN},
            headers={"origin": "https://evil.example", **browser},
        )
    assert page.status_code == 200 and forged.status_code == 401
    assert details.status_code == 200 and details.json()["session"] == "ui-1"
    assert forged.json()["error"]["code"] == "invalid_admin_token"  # not a browser: JSON
    cookie = login.headers["set-cookie"]
    assert UI_TOKEN not in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert addressed.status_code == 401 and "set-cookie" not in addressed.headers
    assert "not read from the address" in addressed.text
    assert asked.status_code == 401 and asked.headers["content-type"].startswith("text/html")
    assert (
        "<form method=post action=/replay/ui>" in asked.text and "not this proxy" not in asked.text
    )
    assert "not this proxy's admin token" in mistyped.text and "set-cookie" not in mistyped.headers
    assert posted_by_a_page.status_code == 403 and "set-cookie" not in posted_by_a_page.headers
    assert home.status_code == 307 and home.headers["location"] == "/replay/ui"
    html = page.text
    assert '<meta http-equiv="refresh"' in html
    assert html.count('<tr class="session"') == 1
    assert (
        '<a href="/replay/sessions/ui-1" title="the full status, as JSON"><code>ui-1</code></a>'
        in html
    )
    assert "1/2 turns" in html and 'style="width:50%"' in html
    assert html.count('class="chip scripted"') == 1
    assert UI_TOKEN not in html


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"host": "127.0.0.1"}, 403),
        ({"host": "0.0.0.0"}, 403),
        ({"host": "127.0.0.1", "insecure_admin": True}, 200),
        ({"host": "0.0.0.0", "insecure_admin": True}, 200),
        ({"host": "127.0.0.1", "admin_token": "t-Ab3Cd5Ef7Gh9Jk"}, 401),
    ],
)
def test_without_a_token_the_admin_api_is_off_unless_the_operator_opens_it(
    settings: dict[str, Any], expected: int
) -> None:
    """Loopback is no reason to trust a request: a reverse proxy or another user of the host
    reaches it too. serve makes a token when none is given; an app without one is closed."""
    from proxy.app import create_app
    from proxy.config import Settings

    with running(create_app(Settings(**settings))) as root:  # served on loopback either way
        r = httpx.get(root + "/replay/sessions")
    assert r.status_code == expected
    if expected == 403:
        message = r.json()["error"]["message"]
        assert "admin API is off" in message and "--insecure-admin" in message


def test_a_stream_stuck_upstream_does_not_hold_up_other_sessions(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    gate = Gate()
    fake.then(gate.answer)
    try:
        with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
            body = {"model": "m", "messages": [{"role": "user", "content": "slow"}], "stream": True}
            with httpx.stream("POST", url + "/chat/completions", json=body) as slow:
                lines = slow.iter_lines()  # kept: a dropped iterator would close the stream
                next(lines)  # open, and stuck until the gate opens
                c = client(url, **{"x-session-affinity": "fast"})
                answer, headers = agent_step(c, start_messages(), stream=True)
                assert headers["x-replay-turn"] == "1/2" and answer["tool_calls"]
                assert not gate.closed.is_set()  # the slow stream is still held open
                gate.released.set()
    finally:
        gate.released.set()
