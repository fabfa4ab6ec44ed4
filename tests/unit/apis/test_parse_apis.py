"""Responses and Anthropic requests real harnesses sent (tests/fixtures/captures), and trajectory
files in those APIs' own shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.apis.anthropic import parse_anthropic
from proxy.apis.responses import parse_responses
from proxy.config import DEFAULT_SESSION_HEADERS
from proxy.errors import BadRequest
from proxy.formats import load_bytes
from proxy.replay.conversation import Lane, session_id
from tests.helpers.captures import captured, headers

PARSERS = {"/v1/responses": parse_responses, "/v1/messages": parse_anthropic}


def calls(client: str) -> list[dict[str, Any]]:
    return [c for c in captured(client) if c["path"] in PARSERS]


def parsed(capture: dict[str, Any]) -> Any:
    return PARSERS[capture["path"]](capture["body"])


@pytest.mark.parametrize(
    ("client", "lanes"),
    [
        ("codex", ["main", "main"]),
        ("opencode_responses", ["toolless", "main", "main"]),
        ("claude_code", ["toolless", "main", "main"]),
        ("claude_code_nonessential_off", ["main", "main"]),
        ("openai_agents", ["main", "main"]),
    ],
)
def test_lanes_of_real_harness_calls(client: str, lanes: list[str]) -> None:
    assert [parsed(c).lane(subagent=False).value for c in calls(client)] == lanes


@pytest.mark.parametrize(
    ("client", "header"),
    [
        ("codex", "session-id"),
        ("opencode_responses", "x-session-affinity"),
        ("claude_code", "x-claude-code-session-id"),
    ],
)
def test_session_header_of_each_harness(client: str, header: str) -> None:
    keys = {session_id(headers(c), DEFAULT_SESSION_HEADERS, parsed(c)) for c in calls(client)}
    assert keys == {headers(calls(client)[0])[header]}


@pytest.mark.parametrize("client", ["codex", "opencode_responses", "claude_code", "openai_agents"])
def test_the_second_call_holds_the_first_scripted_call_by_id(client: str) -> None:
    main = [c for c in calls(client) if parsed(c).lane(subagent=False) is Lane.MAIN]
    conv = parsed(main[1])
    sent_id = main[0]["response"]["decision"]["call_id"]
    assert [c.id for c in conv.replies[0].calls] == [sent_id]
    assert conv.replies[0].calls[0].name == main[0]["response"]["decision"]["tool"]
    assert [r.call_id for r in conv.results] == [sent_id]
    assert conv.task is not None  # the first user message (Codex's is its <environment_context>)
    assert any("hello" in text for text in conv.users.values())


def test_codex_namespace_tools_are_offered_tools() -> None:
    conv = parsed(calls("codex")[0])
    assert (
        "exec_command" in conv.tools and "spawn_agent" in conv.tools
    )  # inside the namespace group


def test_claude_code_system_prompt_and_mid_conversation_system_message() -> None:
    conv = parsed(calls("claude_code")[2])
    assert "Claude" in conv.system
    assert conv.task is not None and "<system-reminder>" in conv.task


@pytest.mark.parametrize(
    ("parser", "body", "param"),
    [
        (parse_responses, {"model": "m"}, "input"),
        (parse_responses, {"input": 5}, "input"),
        (parse_responses, {"input": [3]}, "input[0]"),
        (parse_responses, {"input": [], "tools": {}}, "tools"),
        (parse_anthropic, {"model": "m"}, "messages"),
        (parse_anthropic, {"messages": [{"content": "x"}]}, "messages[0].role"),
        (parse_anthropic, {"messages": [{"role": "user", "content": 4}]}, "messages[0].content"),
        (parse_anthropic, {"messages": [], "tools": "x"}, "tools"),
    ],
)
def test_malformed_bodies_are_bad_requests_naming_the_path(
    parser: Any, body: dict[str, Any], param: str
) -> None:
    with pytest.raises(BadRequest) as caught:
        parser(body)
    assert caught.value.param == param


RESPONSES_ITEMS = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "be brief"}],
    },
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "the task"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "exec_command",
        "arguments": '{"cmd":"ls"}',
    },
    {"type": "function_call_output", "call_id": "c1", "output": "a"},
    {"role": "user", "content": "a hint"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "All done."}],
    },
]
ANTHROPIC_MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "the task"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "think", "signature": "s"},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"},
            {"type": "text", "text": "a hint"},
        ],
    },
    {"role": "assistant", "content": "All done."},
]


HINT_PARTS = [{"type": "text", "text": "a hint"}]


@pytest.mark.parametrize(
    ("document", "fmt", "system", "first_id", "hint"),
    [
        (RESPONSES_ITEMS, "responses", "be brief", "c1", "a hint"),
        (
            {"input": RESPONSES_ITEMS[1:], "instructions": "be brief"},
            "responses",
            "be brief",
            "c1",
            "a hint",
        ),
        (ANTHROPIC_MESSAGES, "anthropic", None, "toolu_1", HINT_PARTS),
        (
            {"system": "be brief", "messages": ANTHROPIC_MESSAGES},
            "anthropic",
            "be brief",
            "toolu_1",
            HINT_PARTS,
        ),
    ],
)
def test_trajectories_in_responses_and_anthropic_shapes_load_into_the_one_model(
    document: Any, fmt: str, system: str | None, first_id: str, hint: Any
) -> None:
    t = load_bytes(json.dumps(document).encode(), name="t", filename="t.json")
    assert (t.format, t.task, t.system) == (fmt, "the task", system)
    assert [len(turn.tool_calls) for turn in t.turns] == [1, 0]
    assert t.turns[0].tool_calls[0].id == first_id and t.turns[0].reasoning == "think"
    assert t.turns[1].text == "All done." and t.turns[1].final
    assert t.tool_outputs == {first_id: "a"}
    assert [u.content for u in t.turns[1].users_before] == [hint]
