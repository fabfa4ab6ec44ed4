"""Requests real harnesses sent (tests/fixtures/captures): lanes, session keys, histories."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.apis.chat import parse_chat
from proxy.config import DEFAULT_SESSION_HEADERS
from proxy.errors import BadRequest
from proxy.replay.conversation import Lane, session_id
from tests.helpers.captures import chat_calls, headers


@pytest.mark.parametrize(
    ("client", "lanes"),
    [
        ("opencode", ["toolless", "main", "main"]),
        ("mini_swe_agent", ["main", "main"]),
        ("mini_swe_agent_textbased", ["toolless", "toolless"]),
        ("openai_agents", ["main", "main", "main", "main"]),
        ("openai_sdk", ["main", "main", "main", "main", "toolless"]),
        ("openhands", ["main", "main"]),
        ("aider", ["toolless", "toolless"]),
    ],
)
def test_lanes_of_real_harness_calls(client: str, lanes: list[str]) -> None:
    got = [parse_chat(c["body"]).lane(subagent=False).value for c in chat_calls(client)]
    assert got == lanes


@pytest.mark.parametrize(
    ("client", "header"),
    [("opencode", "x-session-affinity"), ("openhands", "x-litellm-session-id")],
)
def test_session_header_of_harnesses_that_send_one(client: str, header: str) -> None:
    calls = chat_calls(client)
    keys = {session_id(headers(c), DEFAULT_SESSION_HEADERS, parse_chat(c["body"])) for c in calls}
    assert keys == {headers(calls[0])[header]}


@pytest.mark.parametrize("client", ["mini_swe_agent", "openai_agents"])
def test_fingerprint_is_stable_across_the_turns_of_a_header_less_run(client: str) -> None:
    calls = [c for c in chat_calls(client) if not c["body"].get("stream")]
    keys = {session_id(headers(c), DEFAULT_SESSION_HEADERS, parse_chat(c["body"])) for c in calls}
    assert len(keys) == 1 and next(iter(keys)).startswith("fp-")


@pytest.mark.parametrize("client", ["opencode", "mini_swe_agent", "openhands", "openai_sdk"])
def test_the_second_call_holds_the_first_scripted_call_by_id(client: str) -> None:
    main = [
        c for c in chat_calls(client) if parse_chat(c["body"]).lane(subagent=False) is Lane.MAIN
    ]
    first, second = main[0], main[1]
    conv = parse_chat(second["body"])
    sent_id = first["response"]["decision"]["call_id"]
    assert [c.id for c in conv.replies[0].calls] == [sent_id]
    assert conv.replies[0].calls[0].name == first["response"]["decision"]["tool"]
    assert [r.call_id for r in conv.results] == [sent_id]


def test_opencode_title_call_shares_the_session_but_carries_no_tools() -> None:
    title = chat_calls("opencode")[0]
    conv = parse_chat(title["body"])
    assert conv.tools == ()
    assert (
        session_id(headers(title), DEFAULT_SESSION_HEADERS, conv)
        == headers(title)["x-session-affinity"]
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "messages"),
        ({"messages": "x"}, "messages"),
        ({"messages": [], "model": 3}, "model"),
        ({"messages": [1]}, "messages[0]"),
        ({"messages": [{"content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": {"a": 1}}]}, "messages[0].content"),
        ({"messages": [{"role": "assistant", "tool_calls": {}}]}, "messages[0].tool_calls"),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "x"}]}]},
            "messages[0].tool_calls[0].function",
        ),
        ({"messages": [], "tools": {}}, "tools"),
    ],
)
def test_malformed_bodies_are_bad_requests_naming_the_path(
    body: dict[str, Any], param: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_chat(body)
    assert caught.value.param == param


def test_invalid_session_header_values_are_refused() -> None:
    conv = parse_chat({"messages": []})
    with pytest.raises(BadRequest, match="not a valid session id"):
        session_id({"x-session-affinity": "../../etc"}, DEFAULT_SESSION_HEADERS, conv)
    assert session_id({"session-id": "abc-1"}, DEFAULT_SESSION_HEADERS, conv) == "abc-1"
