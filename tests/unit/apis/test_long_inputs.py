"""Request parsers, splices and answers read back, on inputs of many consecutive pieces: the result
is what it always was, and a long input is handled in linear time (these long cases would take
seconds to minutes if a piece were added to a growing string or looked for in a growing list)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.apis import anthropic, chat, gemini, responses
from proxy.replay.splice import Insertion
from proxy.replay.trajectory import UserMessage

LONG = 20_000


def kilobyte(i: int) -> str:
    return f"{i:06d}" + "x" * 994


def said(content: Any) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": content}


def bash(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "bash", "arguments": "{}"}


# ---- Responses requests


def test_a_replys_message_items_join_with_newlines_leaving_empty_texts_out() -> None:
    items = [
        {"role": "user", "content": "task"},
        said(""),
        said([{"type": "output_text", "text": "first"}]),
        {"type": "reasoning", "summary": []},
        said([]),
        said("second"),
        bash("c1"),
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        said(""),  # a reply of no text and no call: not a reply
        {"role": "user", "content": "more"},
        said("third"),
    ]
    conv = responses.parse_responses({"model": "m", "input": items})
    assert [(r.position, r.end, r.text) for r in conv.replies] == [
        (1, 6, "first\nsecond"),
        (10, 10, "third"),
    ]
    assert [c.id for c in conv.replies[0].calls] == ["c1"]


def test_a_reply_of_many_message_items_is_parsed_in_one_pass() -> None:
    items: list[Any] = [{"role": "user", "content": "task"}]
    items += [said([{"type": "output_text", "text": kilobyte(i)}]) for i in range(LONG)]
    items.append(bash("c1"))
    [reply] = responses.parse_responses({"model": "m", "input": items}).replies
    assert reply.text == "\n".join(kilobyte(i) for i in range(LONG))
    assert (reply.position, reply.end) == (1, LONG + 1)


# ---- Gemini requests


def test_many_parallel_calls_answered_with_made_up_ids_are_parsed_in_one_pass() -> None:
    n = LONG // 2
    calls = [{"functionCall": {"name": "bash", "args": {}}} for _ in range(n)]
    answers = [
        {"functionResponse": {"id": f"made-up-{i}", "name": "bash", "response": {"output": "ok"}}}
        for i in range(n)
    ]
    contents = [
        {"role": "user", "parts": [{"text": "task"}]},
        {"role": "model", "parts": calls},
        {"role": "user", "parts": answers},
    ]
    conv = gemini.parse_gemini({"contents": contents})
    [reply] = conv.replies
    # each answers the oldest call of its name still unanswered: its stand-in id
    assert [r.call_id for r in conv.results] == [c.id for c in reply.calls]


# ---- splices


def notes(*texts: str) -> tuple[UserMessage, ...]:
    return tuple(UserMessage(0, text) for text in texts)


def test_two_insertions_at_one_place_go_as_one_by_one_from_the_last_did() -> None:
    plan = (Insertion(1, notes("a")), Insertion(0, notes("z")), Insertion(1, notes("b", "c")))
    items = [{"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    assert [i.get("content", [{}])[0].get("text") for i in responses.splice(items, plan)] == [
        "z",
        None,
        "b",
        "c",
        "a",
    ]
    # Anthropic and Gemini: after a user message the texts join it, in plan order
    messages = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "x"}]
    spliced = anthropic.splice(messages, (*plan, Insertion(1, notes("d"))))
    assert [m["content"] for m in spliced] == [
        [{"type": "text", "text": "z"}],
        [{"type": "text", "text": t} for t in ("task", "a", "b", "c", "d")],
        "x",
    ]
    contents = [{"role": "model", "parts": [{"text": "x"}]}]
    spliced = gemini.splice(contents, plan)
    assert [[p["text"] for p in c["parts"]] for c in spliced] == [["z"], ["x"], ["b", "c"], ["a"]]
    with pytest.raises(ValueError, match="outside"):
        responses.splice(items, (Insertion(2, notes("far")),))


def test_many_insertions_into_a_long_history_are_made_in_one_pass() -> None:
    n = 10 * LONG
    items = [{"type": "function_call_output", "call_id": f"c{i}", "output": "ok"} for i in range(n)]
    plan = tuple(Insertion(p, notes(f"note {p}")) for p in range(0, n + 1, 20))
    spliced = responses.splice(items, plan)
    assert len(spliced) == n + len(plan)
    assert [k for k, item in enumerate(spliced) if item["type"] == "message"] == [
        p + k for k, p in enumerate(range(0, n + 1, 20))
    ]


# ---- answers read back


def chat_chunk(delta: dict[str, Any]) -> bytes:
    chunk = {"id": "c", "created": 1, "model": "m", "choices": [{"index": 0, "delta": delta}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def test_a_streamed_calls_many_argument_deltas_are_joined_in_one_pass() -> None:
    first = {"index": 0, "id": "call_1", "function": {"name": "wr", "arguments": ""}}
    raw = chat_chunk({"role": "assistant", "tool_calls": [first]})
    raw += chat_chunk({"tool_calls": [{"index": 0, "function": {"name": "ite"}}]})
    raw += b"".join(
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": kilobyte(i)}}]})
        for i in range(LONG)
    )
    raw += b"data: [DONE]\n\n"
    message = chat.read_answer(raw, stream=True).message
    assert message is not None
    [call] = message["tool_calls"]
    assert call["id"] == "call_1" and call["function"]["name"] == "write"
    assert call["function"]["arguments"] == "".join(kilobyte(i) for i in range(LONG))


def test_a_delta_that_is_not_text_is_the_error_it_always_was() -> None:
    raw = chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 5}}]})
    with pytest.raises(TypeError, match=r'can only concatenate str \(not "int"\) to str'):
        chat.read_answer(raw, stream=True)


def anthropic_event(kind: str, **data: Any) -> bytes:
    return f"event: {kind}\ndata: ".encode() + orjson.dumps({"type": kind, **data}) + b"\n\n"


def test_a_streamed_messages_many_text_and_input_deltas_are_joined_in_one_pass() -> None:
    start = {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {}}
    raw = anthropic_event("message_start", message=start)
    raw += anthropic_event(
        "content_block_start", index=0, content_block={"type": "text", "text": "so: "}
    )
    raw += b"".join(
        anthropic_event(
            "content_block_delta", index=0, delta={"type": "text_delta", "text": kilobyte(i)}
        )
        for i in range(LONG // 2)
    )
    raw += anthropic_event("content_block_stop", index=0)
    tool = {"type": "tool_use", "id": "toolu_1", "name": "write", "input": {}}
    raw += anthropic_event("content_block_start", index=1, content_block=tool)
    pieces = ['{"text": "', *(kilobyte(i) for i in range(LONG // 2)), '"}']
    raw += b"".join(
        anthropic_event(
            "content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": p}
        )
        for p in pieces
    )
    raw += anthropic_event("content_block_stop", index=1)
    raw += anthropic_event("message_delta", delta={"stop_reason": "tool_use"}, usage={})
    answer = anthropic.read_answer(raw, stream=True)
    assert answer.native is not None and answer.message is not None
    text, call = answer.native["content"]
    assert text["text"] == "so: " + "".join(kilobyte(i) for i in range(LONG // 2))
    assert call["input"] == {"text": "".join(kilobyte(i) for i in range(LONG // 2))}
    assert answer.message["content"] == text["text"]
    assert answer.finish_reason == "tool_use"
