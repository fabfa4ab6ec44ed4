"""Each API's scripted answer, byte for byte, against golden files (tests/unit/apis/golden/).

The bytes are what the SDKs and harnesses parse, so any change to them must be seen: a golden file
differs, and the diff shows what changed. After a deliberate change, regenerate them with
REPLAY_PROXY_UPDATE_GOLDEN=1 and read the diff before committing it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proxy.apis import anthropic, chat, responses
from proxy.replay.trajectory import ToolCall, Turn

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
)
FINAL_TURN = Turn(2, 4, "All done: notes.txt exists.", None, ())
TURNS = {"tools": TOOL_TURN, "final": FINAL_TURN}
ANTHROPIC_REQUEST = {"model": "claude-x", "thinking": {"type": "enabled", "budget_tokens": 1024}}
RESPONSES_REQUEST = {"model": "gpt-x", "reasoning": {"summary": "auto"}}


def render(api: str, turn: Turn, stream: bool) -> bytes:
    if api == "chat":
        if stream:
            events = chat.chat_stream(
                turn, model="m", completion_id=f"chatcmpl-{KEY}", created=CREATED,
                include_usage=True,
            )  # fmt: skip
            return b"".join(events)
        return chat.chat_completion(
            turn, model="m", completion_id=f"chatcmpl-{KEY}", created=CREATED
        )
    if api == "responses":
        if stream:
            return b"".join(
                responses.response_events(turn, RESPONSES_REQUEST, key=KEY, created=CREATED)
            )
        return responses.response_object(turn, RESPONSES_REQUEST, key=KEY, created=CREATED)
    if stream:
        return b"".join(anthropic.message_events(turn, ANTHROPIC_REQUEST, key=KEY))
    return anthropic.message_object(turn, ANTHROPIC_REQUEST, key=KEY)


@pytest.mark.parametrize("turn", ["tools", "final"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_a_scripted_turn_renders_exactly_as_the_golden_file(
    api: str, stream: bool, turn: str
) -> None:
    got = render(api, TURNS[turn], stream)
    path = GOLDEN / f"{api}-{turn}.{'sse' if stream else 'json'}"
    if os.environ.get("REPLAY_PROXY_UPDATE_GOLDEN"):
        path.write_bytes(got)
    assert path.exists(), f"no golden file {path.name}: run with REPLAY_PROXY_UPDATE_GOLDEN=1"
    assert got.decode() == path.read_bytes().decode()


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
