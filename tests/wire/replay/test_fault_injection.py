"""Faults injected at a scripted turn, over real sockets with the official SDKs (which retry 429
and 5xx by themselves, and a JSON answer whose connection broke).

The script is tests/helpers/agent.py's: two tool turns. A fault fires its `times` for requests of
its turn, then the turn is served; a retried request is never given another turn.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.agent import RECORDED, TOOLS, agent_step, client, follow, start_messages
from tests.helpers.servers import FakeUpstream, running, session_status

Session = dict[str, str]


@pytest.fixture
def script(write_trajectory: Any) -> Path:
    path: Path = write_trajectory(RECORDED, name="two-turns")
    return path


def second_turn(c: openai.OpenAI) -> list[dict[str, Any]]:
    """The messages of a request due turn 2: turn 1 and its result."""
    messages = start_messages()
    first, _ = agent_step(c, messages, stream=False)
    follow(messages, first)
    return messages


def admin(url: str, method: str, session: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method, url.removesuffix("/v1") + f"/replay/sessions/{session}/faults", json=body
    )


def test_the_sdk_retries_a_429_and_gets_the_same_turn(proxy: ProxyFactory, script: Path) -> None:
    with proxy(trajectory=[script], fault=["2:429:0.01"]) as url:
        c = client(url, **{"x-session-affinity": "s429"})
        messages = second_turn(c)
        with pytest.raises(openai.RateLimitError) as limited:  # max_retries=0: it surfaces
            c.chat.completions.create(model="m", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        retried = openai.OpenAI(
            base_url=url, api_key="k", max_retries=2, default_headers={"x-session-affinity": "s429"}
        )
        raw = retried.chat.completions.with_raw_response.create(
            model="m",
            messages=messages,  # type: ignore[arg-type]
            tools=TOOLS,
        )
        session = session_status(url, "s429")
        metrics = httpx.get(url.removesuffix("/v1") + "/metrics").text
    response = limited.value.response
    assert response.headers["retry-after"] == "1" and response.headers["retry-after-ms"] == "10"
    assert "x-should-retry" not in response.headers
    assert response.headers["x-replay-source"] == "fault"
    assert response.headers["x-replay-turn"] == "2/2"
    error = limited.value.body
    assert isinstance(error, dict) and error["type"] == "rate_limit_error"
    assert "fault injected at turn 2/2 of session s429: 429 rate limited" in error["message"]
    # the fault fired once: the next request of turn 2 got the turn itself
    assert raw.headers["x-replay-turn"] == "2/2" and raw.headers["x-replay-source"] == "scripted"
    assert raw.parse().choices[0].message.tool_calls[0].id == "call_B"  # type: ignore[index]
    faults = session["faults"]
    assert faults["set_by"] == "flag" and faults["plan"][0]["fired"] == 1
    assert [(i["turn"], i["kind"]) for i in faults["injected"]] == [(2, "429:0.01")]
    assert session["turns_served"] == 2 and session["scripted_responses"] == 2, session
    assert 'replay_proxy_faults_injected_total{kind="429"} 1.0' in metrics


@pytest.mark.parametrize("kind", ["500", "503"])
def test_server_errors_are_retried_by_the_sdk_on_the_responses_api(
    proxy: ProxyFactory, script: Path, kind: str
) -> None:
    with proxy(trajectory=[script]) as url:
        planned = admin(
            url, "PUT", "resp", [{"turn": 1, "kind": kind, "times": 2, "seconds": 0.01}]
        )
        assert planned.status_code == 200, planned.text
        c = openai.OpenAI(
            base_url=url, api_key="k", max_retries=2, default_headers={"x-session-affinity": "resp"}
        )
        tools: Any = [{"type": "function", "name": "bash", "parameters": {"type": "object"}}]
        raw = c.responses.with_raw_response.create(
            model="m",
            instructions=RECORDED[0]["content"],
            input=RECORDED[1]["content"],
            tools=tools,
        )
        session = session_status(url, "resp")
    out = raw.parse()
    assert [item.type for item in out.output][-1] == "function_call"
    assert raw.headers["x-replay-turn"] == "1/2"
    assert raw.http_request.headers["x-stainless-retry-count"] == "2"  # two faults, then the turn
    assert [i["kind"] for i in session["faults"]["injected"]] == [f"{kind}:0.01"] * 2


@pytest.mark.parametrize("store", ["memory", "sqlite", "redis"])
def test_a_retry_is_never_given_another_turn(
    proxy: ProxyFactory, script: Path, store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """In every store: the count of what fired lives in the session's state."""
    url_of = {
        "memory": lambda: "memory://",
        "sqlite": lambda: f"sqlite:///{tmp_path / 'state.db'}",
        "redis": lambda: request.getfixturevalue("redis_url"),
    }
    faults = ["2:500:0.01", "2:503:0.01"]
    with proxy(trajectory=[script], fault=faults, store=url_of[store]()) as url:
        c = client(url, **{"x-session-affinity": "same"})
        messages = second_turn(c)
        seen = []
        for _ in range(3):
            try:
                raw = c.chat.completions.with_raw_response.create(
                    model="m",
                    messages=messages,  # type: ignore[arg-type]
                    tools=TOOLS,
                )
                seen.append((raw.status_code, raw.headers["x-replay-turn"]))
            except openai.APIStatusError as exc:
                seen.append((exc.status_code, exc.response.headers["x-replay-turn"]))
        injected = session_status(url, "same")["faults"]["injected"]
    assert seen == [(500, "2/2"), (503, "2/2"), (200, "2/2")]
    assert [(i["turn"], i["kind"]) for i in injected] == [(2, "500:0.01"), (2, "503:0.01")]


def test_the_anthropic_sdk_gets_errors_in_its_own_shape(proxy: ProxyFactory, script: Path) -> None:
    with proxy(trajectory=[script], fault=["1:429:0.01", "1:503:0.01"]) as url:
        headers = {"x-session-affinity": "claude"}
        root = url.removesuffix("/v1")
        bare = anthropic.Anthropic(
            base_url=root, api_key="k", max_retries=0, default_headers=headers
        )
        tools: Any = [{"name": "bash", "input_schema": {"type": "object"}}]
        ask = {
            "model": "claude-test",
            "max_tokens": 100,
            "system": RECORDED[0]["content"],
            "messages": [{"role": "user", "content": RECORDED[1]["content"]}],
            "tools": tools,
        }
        with pytest.raises(anthropic.RateLimitError) as limited:
            bare.messages.create(**ask)
        patient = anthropic.Anthropic(
            base_url=root, api_key="k", max_retries=2, default_headers=headers
        )
        with patient.messages.stream(**ask) as stream:  # the 503 first, retried by the SDK
            message = stream.get_final_message()
    body = limited.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "rate_limit_error"
    assert [b.type for b in message.content][-1] == "tool_use" and message.stop_reason == "tool_use"


def test_a_dropped_stream_breaks_off_and_the_retry_gets_the_turn(
    proxy: ProxyFactory, script: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with proxy(trajectory=[script], fault=["1:drop"]) as url:
        c = client(url, **{"x-session-affinity": "cut"})
        got: list[Any] = []
        with pytest.raises((httpx.RemoteProtocolError, openai.APIConnectionError)):
            for chunk in c.chat.completions.create(
                model="m",
                messages=start_messages(),  # type: ignore[arg-type]
                tools=TOOLS,
                stream=True,
            ):
                got.append(chunk)
        whole, headers = agent_step(c, start_messages(), stream=True)
        session = session_status(url, "cut")
    # part of the events came (the role, the text), never the finish
    assert got and not any(ch.choices and ch.choices[0].finish_reason for ch in got)
    assert headers["x-replay-turn"] == "1/2" and whole["finish"] == "tool_calls"
    assert whole["tool_calls"][0]["id"] == "call_A"
    assert [i["kind"] for i in session["faults"]["injected"]] == ["drop"]
    assert session["scripted_responses"] == 1  # the cut answer is not counted as served
    # the request log says the cut was made on purpose
    assert any("fault drop injected" in r.getMessage() for r in caplog.records)


def test_a_dropped_stream_never_holds_a_tool_call(proxy: ProxyFactory, script: Path) -> None:
    """Turn 2 is a call alone: half its events (the role, the call, the finish, the usage) would
    hold the whole call, which a harness that runs calls as they stream in would run, then run
    again on the retry. The cut comes before it."""
    with proxy(trajectory=[script], fault=["2:drop"]) as url:
        c = client(url, **{"x-session-affinity": "cut-2"})
        first, _ = agent_step(c, start_messages(), stream=True)
        messages = start_messages()
        follow(messages, first)
        messages.append({"role": "user", "content": "Remember to use ls -la."})
        got: list[Any] = []
        with pytest.raises((httpx.RemoteProtocolError, openai.APIConnectionError)):
            for chunk in c.chat.completions.create(
                model="m", messages=messages, tools=TOOLS, stream=True,
                stream_options={"include_usage": True},
            ):  # fmt: skip
                got.append(chunk)
        again, headers = agent_step(c, messages, stream=True)
    assert got and not any(ch.choices and ch.choices[0].delta.tool_calls for ch in got)
    assert headers["x-replay-turn"] == "2/2" and again["tool_calls"][0]["id"] == "call_B"


def test_a_dropped_json_answer_is_retried_by_the_sdk(proxy: ProxyFactory, script: Path) -> None:
    with proxy(trajectory=[script], fault=["1:drop"]) as url:
        bare = client(url, **{"x-session-affinity": "json-cut"})
        with pytest.raises(openai.APIConnectionError):
            bare.chat.completions.create(model="m", messages=start_messages(), tools=TOOLS)  # type: ignore[arg-type]
    with proxy(trajectory=[script], fault=["1:drop"]) as url:
        patient = openai.OpenAI(
            base_url=url, api_key="k", max_retries=1, default_headers={"x-session-affinity": "j"}
        )
        raw = patient.chat.completions.with_raw_response.create(
            model="m",
            messages=start_messages(),  # type: ignore[arg-type]
            tools=TOOLS,
        )
    assert (
        raw.headers["x-replay-turn"] == "1/2"
        and raw.http_request.headers["x-stainless-retry-count"] == "1"
    )


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", ["stall:0.05", "delay:0.05"])
def test_a_stalled_or_delayed_answer_still_arrives_whole(
    proxy: ProxyFactory, script: Path, kind: str, stream: bool
) -> None:
    with proxy(trajectory=[script], fault=[f"1:{kind}"]) as url:
        c = client(url, **{"x-session-affinity": "slow"})
        message, headers = agent_step(c, start_messages(), stream=stream)
        session = session_status(url, "slow")
    assert headers["x-replay-fault"] == kind and headers["x-replay-source"] == "scripted"
    assert message["tool_calls"][0]["id"] == "call_A" and message["finish"] == "tool_calls"
    assert [i["kind"] for i in session["faults"]["injected"]] == [kind]
    assert session["turns_served"] == 1  # a slow answer is still the turn


def test_faults_work_in_strict_mode(proxy: ProxyFactory, tmp_path: Path) -> None:
    fake = FakeUpstream()
    records = tmp_path / "records"
    from tests.helpers.servers import tool_call

    fake.then(tool_call("bash", json.dumps({"command": "ls"}), "call_S1"))
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", record_dir=records) as url:
        recorded, _ = agent_step(
            client(url, **{"x-session-affinity": "rec"}), start_messages(), stream=True
        )
    [recording] = sorted(records.iterdir())
    with proxy(trajectory=[recording], mode="strict", fault=["1:503:0.01", "1:drop"]) as url:
        patient = openai.OpenAI(
            base_url=url, api_key="k", max_retries=1, default_headers={"x-session-affinity": "rec"}
        )
        cut: list[Any] = []
        with pytest.raises((httpx.RemoteProtocolError, openai.APIConnectionError)):
            for chunk in patient.chat.completions.create(  # the 503 retried, then the cut
                model="gpt-test",
                messages=start_messages(),  # type: ignore[arg-type]
                tools=TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            ):
                cut.append(chunk)
        assert cut and not any(ch.choices and ch.choices[0].finish_reason for ch in cut)
        stream = patient.chat.completions.create(
            model="gpt-test",
            messages=start_messages(),  # type: ignore[arg-type]
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        ids = [d.id for ch in stream for c in ch.choices for d in c.delta.tool_calls or [] if d.id]
        session = session_status(url, "rec")
    assert ids == ["call_S1"] == [recorded["tool_calls"][0]["id"]]
    assert [i["kind"] for i in session["faults"]["injected"]] == ["503:0.01", "drop"]


def test_the_admin_api_sets_shows_and_clears_a_sessions_faults(
    proxy: ProxyFactory, script: Path
) -> None:
    with proxy(trajectory=[script], fault=["1:500"]) as url:
        shown = admin(url, "GET", "new").json()  # not seen yet: the --fault plan
        assert shown["set_by"] == "flag" and [f["kind"] for f in shown["plan"]] == ["500"]
        assert admin(url, "GET", "bad id!").status_code == 400

        plan = [{"turn": 2, "kind": "stall", "seconds": 0.01, "times": 2}]
        put = admin(url, "PUT", "own", plan)
        assert put.status_code == 200, put.text
        assert put.json()["plan"] == [{**plan[0], "fired": 0}] and put.json()["set_by"] == "admin"
        refused = admin(url, "PUT", "own", [{"turn": 2, "kind": "teapot"}])
        assert refused.status_code == 400
        message = refused.json()["error"]["message"]
        assert "the faults were not accepted, the old ones stay: [0].kind" in message, message
        assert admin(url, "GET", "own").json()["plan"] == [{**plan[0], "fired": 0}]
        not_json = httpx.put(url.removesuffix("/v1") + "/replay/sessions/own/faults", content=b"{")
        assert not_json.status_code == 400 and "not JSON" in not_json.json()["error"]["message"]

        # its own plan replaced the flag's: turn 1 is served, turn 2 stalls twice
        c = client(url, **{"x-session-affinity": "own"})
        messages = second_turn(c)
        for _ in range(3):
            agent_step(c, messages, stream=False)
        fired = admin(url, "GET", "own").json()
        assert fired["plan"][0]["fired"] == 2
        assert [(i["turn"], i["kind"]) for i in fired["injected"]] == [(2, "stall:0.01")] * 2

        assert admin(url, "DELETE", "cleared").status_code == 204
        cleared = client(url, **{"x-session-affinity": "cleared"})
        _, headers = agent_step(cleared, start_messages(), stream=False)  # no 500: none left
        assert headers["x-replay-source"] == "scripted"
        assert admin(url, "GET", "cleared").json() == {
            "session": "cleared",
            "set_by": "admin",
            "plan": [],
            "injected": [],
        }
        page = httpx.get(url.removesuffix("/v1") + "/replay/ui").text
    assert "faults injected: 2 (stall:0.01 at turn 2, stall:0.01 at turn 2)" in page
