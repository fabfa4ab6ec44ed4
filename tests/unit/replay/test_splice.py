"""The splice, pure: the trajectory's later user messages put into a live request where they stood,
in each API's own shape, and never twice."""

from __future__ import annotations

from typing import Any

from proxy.apis import anthropic, responses
from proxy.apis.chat import parse_chat
from proxy.formats import load_bytes
from proxy.replay.splice import Insertion, apply_chat, plan_splice
from proxy.replay.trajectory import UserMessage
from tests.helpers.agent import RECORDED, bash


def script() -> Any:
    import orjson

    return load_bytes(orjson.dumps(RECORDED), name="run", filename="run.json")


def history(*, with_note: bool = False) -> list[dict[str, Any]]:
    """What the harness sends once both scripted turns are in its history (it never saw the
    recording's user messages between them)."""
    messages: list[dict[str, Any]] = [
        RECORDED[0],
        RECORDED[1],
        {
            "role": "assistant",
            "content": "Creating it.",
            "tool_calls": [bash("call_A", "touch notes.txt")],
        },
        {"role": "tool", "tool_call_id": "call_A", "content": ""},
    ]
    if with_note:
        messages.append({"role": "user", "content": "Remember to use ls -la."})
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [bash("call_B", "ls -la")]},
        {"role": "tool", "tool_call_id": "call_B", "content": "notes.txt"},
    ]
    return messages


def plan_for(messages: list[dict[str, Any]]) -> tuple[Insertion, ...]:
    conv = parse_chat({"model": "m", "messages": messages, "tools": []})
    return plan_splice(conv, conv.replies, script(), held=2)


def test_user_messages_go_before_the_turn_they_preceded_and_after_the_last_results() -> None:
    messages = history()
    spliced = apply_chat(messages, plan_for(messages))
    users = [(i, m["content"]) for i, m in enumerate(spliced) if m["role"] == "user"]
    assert users == [
        (1, RECORDED[1]["content"]),
        (4, "Remember to use ls -la."),  # before the turn it preceded
        (7, "Now summarise what you did."),  # trailing: after the last turn's tool result
    ]


def test_a_user_message_the_history_already_holds_is_not_put_in_again() -> None:
    messages = history(with_note=True)
    plan = plan_for(messages)
    assert [u.content for i in plan for u in i.users] == ["Now summarise what you did."]


def test_responses_and_anthropic_take_the_messages_in_their_own_shapes() -> None:
    note = (Insertion(2, (UserMessage(9, "Remember to use ls -la."),)),)
    items: list[Any] = [
        {"role": "user", "content": "task"},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    assert responses.splice(items, note)[2] == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Remember to use ls -la."}],
    }
    # Anthropic roles must alternate: the text joins the user message of tool results before it
    messages: list[Any] = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
    ]
    spliced = anthropic.splice(messages, (Insertion(3, note[0].users),))
    assert len(spliced) == 3 and spliced[2]["content"][-1] == {
        "type": "text",
        "text": "Remember to use ls -la.",
    }
    assert spliced[2]["content"][0]["type"] == "tool_result"
