"""Each API's scripted answer, byte for byte, against golden files (tests/unit/apis/golden/).

The bytes are what the SDKs and harnesses parse, so any change to them must be seen: a golden file
differs, and the diff shows what changed. After a deliberate change, regenerate them with
REPLAY_PROXY_UPDATE_GOLDEN=1 and read the diff before committing it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from proxy.apis import APIS, BY_NAME
from proxy.replay.trajectory import ToolCall, Turn, Usage
from tests.conftest import ROOT

GOLDEN = Path(__file__).parent / "golden"
CREATED = 1_700_000_000
KEY = "replay-0123456789ab-1"

TOOL_TURN = Turn(
    1,
    2,
    "Let me look at the files first.",
    "The task needs the file list.",
    (
        ToolCall("call_1", "bash", '{"command": "ls -la"}'),
        ToolCall("call_2", "bash", '{"command":"cat README.md"}'),
    ),
    created=CREATED,
)
FINAL_TURN = Turn(2, 4, "All done: notes.txt exists.", None, (), created=CREATED)
TURNS = {"tools": TOOL_TURN, "final": FINAL_TURN}
# the request each API's answer is rendered for: every row of the Api table needs one (and its
# golden files), so a new API cannot be left out
REQUESTS: dict[str, tuple[dict[str, Any], str]] = {  # body, path
    "chat": (
        {"model": "m", "messages": [], "stream_options": {"include_usage": True}},
        "/v1/chat/completions",
    ),
    "responses": (
        {"model": "gpt-x", "input": [], "reasoning": {"summary": "auto"}},
        "/v1/responses",
    ),
    "anthropic": (
        {
            "model": "claude-x",
            "messages": [],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        },
        "/v1/messages",
    ),
    "gemini": (
        {"contents": [], "generationConfig": {"thinkingConfig": {"includeThoughts": True}}},
        "/v1beta/models/gemini-x:generateContent",
    ),
    "vertex": (
        {"anthropic_version": "vertex-2023-10-16", "messages": []},
        "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-x@1:rawPredict",
    ),
    # a stream's events each in an AWS event stream frame: the golden file is binary
    "bedrock": (
        {"anthropic_version": "bedrock-2023-05-31", "messages": []},
        "/model/us.anthropic.claude-x-v1:0/invoke",
    ),
}


def render(name: str, turn: Turn, stream: bool) -> bytes:
    """The turn as the proxy answers it, through the API's row."""
    api = BY_NAME[name]
    body, path = REQUESTS[name]
    conv = api.parse(body)
    if api.target is not None:
        api.target(conv, path, "")
    if stream:  # as it goes over the wire: SSE, or framed
        return b"".join(api.framing.out(api.stream(turn, conv, body, KEY)))
    return api.whole(turn, conv, body, KEY)


def test_every_api_has_a_request_to_render_for() -> None:
    assert sorted(REQUESTS) == sorted(api.name for api in APIS)


@pytest.mark.parametrize("turn", ["tools", "final"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("api", [api.name for api in APIS])
def test_a_scripted_turn_renders_exactly_as_the_golden_file(
    api: str, stream: bool, turn: str
) -> None:
    got = render(api, TURNS[turn], stream)
    path = GOLDEN / f"{api}-{turn}.{'sse' if stream else 'json'}"
    if os.environ.get("REPLAY_PROXY_UPDATE_GOLDEN"):
        path.write_bytes(got)
    assert path.exists(), f"no golden file {path.name}: run with REPLAY_PROXY_UPDATE_GOLDEN=1"
    want = path.read_bytes()
    if BY_NAME[api].framing.frame is None or not stream:  # text: a diff that can be read
        assert got.decode() == want.decode()
    assert got == want


def test_the_golden_streams_keep_the_order_clients_parse() -> None:
    """What the golden files hold, said once more in words, so that regenerating them cannot
    quietly accept a stream in an order a client would reject."""
    chat_events = (GOLDEN / "chat-tools.sse").read_text().split("\n\n")
    assert '"role":"assistant"' in chat_events[0]
    assert '"reasoning_content"' in chat_events[1] and '"content":"Let me' in chat_events[2]
    # each tool call in one delta, with id, type and name on it (opencode needs all three)
    assert all('"id":"call_' in e and '"type":"function"' in e for e in chat_events[3:5])
    assert '"finish_reason":"tool_calls"' in chat_events[5] and '"usage"' in chat_events[6]
    assert chat_events[7] == "data: [DONE]" and chat_events[8] == ""

    kinds = [
        line.removeprefix("event: ")
        for line in (GOLDEN / "responses-tools.sse").read_text().splitlines()
        if line.startswith("event: ")
    ]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed" and "[DONE]" not in kinds
    assert (
        kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 4
    )

    anthropic_kinds = [
        line.removeprefix("event: ")
        for line in (GOLDEN / "anthropic-tools.sse").read_text().splitlines()
        if line.startswith("event: ")
    ]
    assert anthropic_kinds[:2] == ["message_start", "ping"]
    assert anthropic_kinds[-2:] == ["message_delta", "message_stop"]
    assert anthropic_kinds.count("content_block_start") == 4  # thinking, text, two tool_use

    gemini_chunks = [
        json.loads(e.removeprefix("data: "))
        for e in (GOLDEN / "gemini-tools.sse").read_text().split("\n\n")
        if e
    ]
    parts = [c["candidates"][0]["content"]["parts"] for c in gemini_chunks]
    assert parts[0] == [{"text": "The task needs the file list.", "thought": True}]
    assert [p[0]["functionCall"]["id"] for p in parts[2:]] == ["call_1", "call_2"]
    # finishReason and usageMetadata on the last chunk only, as the google-genai SDK reads them
    assert [("finishReason" in c["candidates"][0]) for c in gemini_chunks] == [
        False,
        False,
        False,
        True,
    ]
    assert [("usageMetadata" in c) for c in gemini_chunks] == [False, False, False, True]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("api", [api.name for api in APIS])
def test_a_scripted_answer_reports_its_turns_usage_as_docs_replay_says(
    api: str, stream: bool
) -> None:
    """Every API, Gemini's usageMetadata included, carries the turn's usage (the docs once said
    it was zero, and Gemini's zeroed)."""
    turn = TOOL_TURN.served(Usage(12345, 678), CREATED)
    got = render(api, turn, stream)
    got = (BY_NAME[api].framing.sse(got) if stream else got).decode()  # Bedrock's unframed
    assert "12345" in got and "678" in got, got[-400:]
    page = (ROOT / "docs" / "replay.md").read_text().lower()
    assert "zeroed" not in page and "usage in scripted answers is zero" not in page
