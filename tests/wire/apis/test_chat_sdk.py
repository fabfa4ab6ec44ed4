"""End to end over real sockets: the official openai SDK -> the proxy under uvicorn -> a fake LLM."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.agent import (
    RECORDED,
    SYSTEM,
    TASK,
    TOOLS,
    agent_step,
    client,
    follow,
    start_messages,
)
from tests.helpers.servers import FakeUpstream, status, text, tool_call


@pytest.mark.parametrize("stream", [False, True])
def test_scripted_turns_then_live_with_the_splice(
    stream: bool,
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
) -> None:
    fake, upstream_url = upstream
    path = write_trajectory(RECORDED)
    with proxy(upstream=upstream_url, trajectory=[path]) as url:
        c = client(url, **{"x-session-affinity": "ses_one"})
        messages = start_messages()

        first, h1 = agent_step(c, messages, stream=stream)
        assert h1["x-replay-source"] == "scripted" and h1["x-replay-turn"] == "1/2"
        assert h1["x-should-retry"] == "false"
        assert first["finish"] == "tool_calls"
        assert first["content"] == "Creating it."  # the <think> block never becomes visible text
        assert [(t["id"], t["function"]["arguments"]) for t in first["tool_calls"]] == [
            ("call_A", '{"command": "touch notes.txt"}')
        ]
        if stream:
            # nothing recorded: estimated at about 4 characters a token (proxy.replay.usage):
            # "Creating it.", "first the file", "bash" and its arguments are 60 characters
            usage = first["usage"]
            assert usage is not None and usage.completion_tokens == 15
            assert usage.prompt_tokens > 0 and usage.completion_tokens_details.reasoning_tokens == 4
        else:
            assert first["reasoning"] == "first the file"
        follow(messages, first)

        second, h2 = agent_step(c, messages, stream=stream)
        assert h2["x-replay-turn"] == "2/2"
        assert [t["id"] for t in second["tool_calls"]] == ["call_B"]
        follow(messages, second)
        assert fake.posts() == []  # nothing reached the model while the script lasted

        fake.then(text("I created notes.txt and listed it."))
        live, h3 = agent_step(c, messages, stream=stream)
        assert h3["x-replay-source"] == "upstream"
        assert live["content"] == "I created notes.txt and listed it."

    [sent] = fake.posts()
    assert (
        sent.headers["authorization"] == "Bearer sk-client-key"
    )  # no --upstream-api-key: passed on
    got = sent.json["messages"]
    assert [m["role"] for m in got] == [
        "system",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
        "tool",
        "user",
    ]
    assert got[4]["content"] == "Remember to use ls -la."  # before the turn it preceded
    assert got[7]["content"] == "Now summarise what you did."  # after the last turn's results
    assert got[2]["tool_calls"][0]["id"] == "call_A" and got[5]["tool_calls"][0]["id"] == "call_B"
    assert got[3]["content"].startswith("ran ")  # the harness's real result, not the recorded one


def test_a_retried_request_gets_the_same_turn_and_the_status_is_exact(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = client(url, **{"x-session-affinity": "ses_retry"})
        messages = start_messages()
        a, _ = agent_step(c, messages, stream=False)
        b, hb = agent_step(c, messages, stream=True)  # the same history again, e.g. after a timeout
        assert hb["x-replay-turn"] == "1/2"
        assert a["tool_calls"][0]["id"] == b["tool_calls"][0]["id"] == "call_A"
        follow(messages, a)
        _, h2 = agent_step(c, messages, stream=False)
        assert h2["x-replay-turn"] == "2/2"
        status_ = httpx.get(url.removesuffix("/v1") + "/replay/sessions/ses_retry").json()
    assert status_["turns_served"] == 2
    assert status_["scripted_responses"] == 3
    assert status_["phase"] == "served"
    assert status_["script"]["bound_by"] == "task" and status_["script"]["task_match"] is True


def test_tool_less_and_subagent_calls_go_upstream_and_consume_nothing(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = client(url, **{"x-session-affinity": "ses_side"})
        fake.then(text("A title"), text("subagent answer"), text("Claude Code subagent"))
        title = c.chat.completions.with_raw_response.create(
            model="small",
            messages=[
                {"role": "system", "content": "You are a title generator."},
                {"role": "user", "content": TASK},
            ],
        )
        assert title.headers["x-replay-source"] == "upstream"
        assert title.parse().choices[0].message.content == "A title"
        sub = c.chat.completions.create(
            model="m",
            messages=start_messages(),
            tools=TOOLS,
            extra_headers={"x-parent-session-id": "ses_side"},
        )
        assert sub.choices[0].message.content == "subagent answer"
        # Claude Code 2.x: the parent's session id, and the subagent's own id beside it
        claude_sub = c.chat.completions.create(
            model="m",
            messages=start_messages(),
            tools=TOOLS,
            extra_headers={"x-claude-code-agent-id": "a1b2c3"},
        )
        assert claude_sub.choices[0].message.content == "Claude Code subagent"
        first, headers = agent_step(c, start_messages(), stream=True)
        assert headers["x-replay-turn"] == "1/2" and first["tool_calls"][0]["id"] == "call_A"
        status_ = httpx.get(url.removesuffix("/v1") + "/replay/sessions/ses_side").json()
    assert status_["forwarded"] == {"main": 0, "toolless": 1, "subagent": 2}
    assert status_["turns_served"] == 1
    assert len(fake.posts()) == 3
    # side calls are forwarded untouched: nothing spliced into them
    assert [m["content"] for m in fake.posts()[0].json["messages"]][-1] == TASK


def test_header_less_clients_get_replay_by_conversation_fingerprint(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    with proxy(
        upstream=upstream_url, trajectory=[write_trajectory(RECORDED)], bind_on_task=True
    ) as url:
        c = client(url)
        messages = start_messages()
        first, h1 = agent_step(c, messages, stream=False)
        assert h1["x-replay-session"].startswith("fp-")
        follow(messages, first)
        _, h2 = agent_step(c, messages, stream=False)
        assert h2["x-replay-session"] == h1["x-replay-session"] and h2["x-replay-turn"] == "2/2"
        # another task: no trajectory has it, and --bind-on-task keeps the unclaimed one out
        other = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "something else"},
        ]
        _, h3 = agent_step(c, other, stream=False)
        assert h3["x-replay-source"] == "upstream"


def test_divergence_error_names_session_turn_and_path(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = openai.OpenAI(
            base_url=url, api_key="k", default_headers={"x-session-affinity": "ses_div"}
        )  # default retries
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=False)
        first["tool_calls"][0]["id"] = "call_REWRITTEN"
        follow(messages, first)
        with pytest.raises(openai.NotFoundError) as caught:
            agent_step(c, messages, stream=False)
        status_ = httpx.get(url.removesuffix("/v1") + "/replay/sessions/ses_div").json()
    error = caught.value.body
    assert isinstance(error, dict)
    assert "session ses_div" in error["message"] and "turn 1/2" in error["message"]
    assert error["param"] == "messages[2].tool_calls[0].id"
    assert error["code"] == "replay_diverged"
    assert (
        error["replay"]["expected"] == '"call_A"'
        and error["replay"]["actual"] == '"call_REWRITTEN"'
    )
    assert (
        status_["phase"] == "diverged" and status_["divergences"] == 1
    )  # x-should-retry: no retries
    assert status_["divergence"]["path"] == "messages[2].tool_calls[0].id"
    assert fake.posts() == []


def test_divergence_live_policy_goes_live_from_there(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    with proxy(
        upstream=upstream_url, trajectory=[write_trajectory(RECORDED)], on_divergence="live"
    ) as url:
        c = client(url, **{"x-session-affinity": "ses_live"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=False)
        first["tool_calls"][0]["id"] = "call_OTHER"
        follow(messages, first)
        fake.then(tool_call("bash", '{"command": "pwd"}', "call_live"))
        live, h = agent_step(c, messages, stream=False)
        assert h["x-replay-source"] == "upstream" and live["tool_calls"][0]["id"] == "call_live"
        # even a fresh history now goes upstream: the session is live for good
        _, h_again = agent_step(c, start_messages(), stream=False)
        assert h_again["x-replay-source"] == "upstream"
        status_ = httpx.get(url.removesuffix("/v1") + "/replay/sessions/ses_live").json()
    assert status_["phase"] == "live" and status_["live_reason"] == "diverged"
    assert status_["divergence"]["turn"] == 1
    assert status_["forwarded"]["main"] == 2


def test_upstream_down_and_upstream_missing_are_clear_errors(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    # port 9 (discard): nothing listens
    with (
        proxy(upstream="http://127.0.0.1:9/v1") as url,
        pytest.raises(openai.APIStatusError) as down,
    ):
        client(url).chat.completions.create(model="m", messages=start_messages())
    assert down.value.status_code == 502
    assert "127.0.0.1:9/v1 cannot be reached" in down.value.message
    with proxy() as url:
        c = openai.OpenAI(
            base_url=url, api_key="k", default_headers={"x-session-affinity": "s1"}
        )  # retries on
        with pytest.raises(openai.APIStatusError) as missing:
            c.chat.completions.create(model="m", messages=start_messages())
        status_ = httpx.get(url.removesuffix("/v1") + "/replay/sessions/s1").json()
    assert missing.value.status_code == 503 and "no upstream configured" in missing.value.message
    assert status_["errors"] == 1  # x-should-retry: false stopped the SDK's retries


def test_upstream_errors_pass_through_unchanged(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    fake.then(
        status(429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after": "7"})
    )
    with proxy(upstream=upstream_url) as url:
        r = httpx.post(url + "/chat/completions", json={"model": "m", "messages": start_messages()})
    assert r.status_code == 429
    assert r.headers["retry-after"] == "7" and r.headers["x-replay-source"] == "upstream"
    assert r.json()["error"]["message"] == "slow down"


def test_other_endpoints_and_the_upstream_key_are_forwarded(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    fake.then(
        status(
            200,
            {
                "object": "list",
                "data": [{"id": "m", "object": "model", "created": 1, "owned_by": "x"}],
            },
        )
    )
    with proxy(upstream=upstream_url, upstream_api_key="sk-upstream-secret") as url:
        models = client(url).models.list()
        assert [m.id for m in models.data] == ["m"]
    [seen] = fake.requests
    assert (seen.method, seen.path) == ("GET", "/v1/models")
    assert seen.headers["authorization"] == "Bearer sk-upstream-secret"
    assert "sk-client-key" not in json.dumps(seen.headers)
