"""A scripted turn as a chat.completion, or as the chat.completion.chunk SSE stream.

Stream order (replay-semantics.md section 4; opencode's parser needs id, type and function.name on
the first chunk of each tool call): role, reasoning, content, one delta per tool call with its full
arguments, the finish chunk, a usage chunk if asked for, [DONE].
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.replay.trajectory import Turn

USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}  # no model ran


def finish_reason(turn: Turn) -> str:
    return "stop" if turn.final else "tool_calls"


def _calls(turn: Turn) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in turn.tool_calls
    ]


def chat_message(turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = _calls(turn)
    return message


def chat_completion(turn: Turn, *, model: str, completion_id: str, created: int) -> bytes:
    message = chat_message(turn)
    return orjson.dumps(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish_reason(turn),
                    "logprobs": None,
                }
            ],
            "usage": USAGE,
        }
    )


def chat_stream(
    turn: Turn, *, model: str, completion_id: str, created: int, include_usage: bool
) -> list[bytes]:
    """The SSE events, one bytes object each."""
    head = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
    }

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {
            **head,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return b"data: " + orjson.dumps(chunk) + b"\n\n"

    events = [event({"role": "assistant"})]
    if turn.reasoning:
        events.append(event({"reasoning_content": turn.reasoning}))
    if turn.text:
        events.append(event({"content": turn.text}))
    for i, call in enumerate(_calls(turn)):
        events.append(event({"tool_calls": [{"index": i, **call}]}))
    events.append(event({}, finish_reason(turn)))
    if include_usage:
        events.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": USAGE}) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events
