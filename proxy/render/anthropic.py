"""A scripted turn as an Anthropic Messages API answer: the message object, or its SSE events.

Stream: message_start (content [] and usage), ping, then per block (thinking, text, tool_use, in
that order) content_block_start / _delta / _stop, then message_delta with stop_reason (tool_use or
end_turn) and usage, and message_stop. Every event has its `event:` line: the Anthropic SDKs drop
events without one. Thinking is sent only when the request enables it, with a signature the proxy
can recognise as its own (it is stripped before a conversation is forwarded to the real API, which
would reject it). No empty text block is ever sent. tool_use input is the recorded arguments,
parsed: it must be a JSON object.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson

from proxy.errors import ProxyError
from proxy.replay.ids import derived, wire_id
from proxy.replay.trajectory import Turn

SIGNATURE_MARK = b"rp1:"  # the decoded start of the proxy's own thinking signatures


class Unservable(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "unservable_turn"


def signature(thinking: str) -> str:
    return base64.b64encode(SIGNATURE_MARK + hashlib.sha256(thinking.encode()).digest()).decode()


def is_own_signature(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return base64.b64decode(value, validate=True).startswith(SIGNATURE_MARK)
    except ValueError:
        return False


def _usage(output: int) -> dict[str, Any]:
    return {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output,
    }


def _thinking_wanted(request: dict[str, Any]) -> bool:
    thinking = request.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _input(turn: Turn, index: int) -> dict[str, Any]:
    call = turn.tool_calls[index]
    value = orjson.loads(call.arguments)
    if not isinstance(value, dict):
        raise Unservable(
            f"scripted turn {turn.number}: the arguments of {call.name} call {call.id} are not a JSON "
            "object, and the Anthropic API takes only objects as tool_use input"
        )
    return value


def blocks(turn: Turn, request: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if turn.reasoning and _thinking_wanted(request):
        out.append(
            {"type": "thinking", "thinking": turn.reasoning, "signature": signature(turn.reasoning)}
        )
    if turn.text:
        out.append({"type": "text", "text": turn.text})
    for i, call in enumerate(turn.tool_calls):
        out.append(
            {
                "type": "tool_use",
                "id": wire_id("anthropic", call.id),
                "name": call.name,
                "input": _input(turn, i),
            }
        )
    return out


def _stop_reason(turn: Turn) -> str:
    return "end_turn" if turn.final else "tool_use"


def _message(
    request: dict[str, Any], key: str, content: list[Any], stop: str | None, output_tokens: int
) -> dict[str, Any]:
    return {
        "id": derived("msg_01", key, length=22),
        "type": "message",
        "role": "assistant",
        "model": request.get("model") or "replay",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {**_usage(output_tokens), "service_tier": "standard"},
    }


def message_object(turn: Turn, request: dict[str, Any], *, key: str) -> bytes:
    return orjson.dumps(_message(request, key, blocks(turn, request), _stop_reason(turn), 0))


def message_events(turn: Turn, request: dict[str, Any], *, key: str) -> list[bytes]:
    content = blocks(turn, request)
    events: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        events.append(
            f"event: {kind}\ndata: ".encode() + orjson.dumps({"type": kind, **data}) + b"\n\n"
        )

    emit("message_start", message=_message(request, key, [], None, 1))
    emit("ping")
    for index, block in enumerate(content):
        kind = block["type"]
        if kind == "thinking":
            emit(
                "content_block_start",
                index=index,
                content_block={"type": "thinking", "thinking": "", "signature": ""},
            )
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "thinking_delta", "thinking": block["thinking"]},
            )
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "signature_delta", "signature": block["signature"]},
            )
        elif kind == "text":
            emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "text_delta", "text": block["text"]},
            )
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            emit("content_block_start", index=index, content_block=start)
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": ""},
            )
            partial = orjson.dumps(block["input"]).decode()
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": partial},
            )
        emit("content_block_stop", index=index)
    emit(
        "message_delta",
        delta={"stop_reason": _stop_reason(turn), "stop_sequence": None},
        usage=_usage(0),
    )
    emit("message_stop")
    return events
