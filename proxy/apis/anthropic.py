"""The Anthropic Messages API (/v1/messages): a request body read into a Conversation, a
scripted turn written as a message object or its SSE events, the conversation made fit for the
real API, and an answer read back.

Assistant messages are the replies (tool_use blocks are the calls); tool_result blocks in user
messages are the results, matched by tool_use_id; the text blocks of user messages are user text.
The top-level `system` and `role: "system"` messages before the task are the system prompt.

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
import re
from typing import Any

import orjson

from proxy.apis.anthropic_history import messages_to_chat
from proxy.apis.readback import Assembled, arguments_object, event_data, sse_events
from proxy.apis.request import malformed, opened, spliced
from proxy.errors import BadRequest
from proxy.replay.content import is_content, text_of
from proxy.replay.conversation import Call, Conversation, Reply, Result, fold_greeting
from proxy.replay.ids import derived
from proxy.replay.splice import Insertion
from proxy.replay.trajectory import Turn
from proxy.replay.usage import NO_USAGE

# ---- the request


def parse_anthropic(body: Any) -> Conversation:
    messages, model = opened(body, "messages")
    if not isinstance(messages, list):
        raise BadRequest("'messages' must be an array", param="messages")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be an array", param="tools")
    choice = body.get("tool_choice")
    conv = Conversation(  # positional: keyword arguments cost as much as the rest of __init__
        "anthropic",
        model,
        body.get("stream") is True,
        False,  # include_usage
        tuple(
            t["name"] for t in tools or [] if isinstance(t, dict) and isinstance(t.get("name"), str)
        ),
        isinstance(choice, dict) and choice.get("type") == "none",  # tool_choice_none
        len(messages),  # message_count
    )
    conv.wire_id = tool_use_id
    system = body.get("system")
    systems = [text_of(system)] if system else []
    for pos, message in enumerate(messages):
        path = ("messages", pos)
        if not isinstance(message, dict):
            raise malformed(path, "must be an object")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str):
            raise malformed((*path, "role"), "is missing")
        if not is_content(content):
            raise malformed((*path, "content"), "must be a string or an array of blocks")
        blocks = content if isinstance(content, list) else []
        if role == "assistant":
            reply = Reply(pos, path, "", [], (*path, "content"), pos)
            texts = []
            for k, block in enumerate(blocks):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    call_id, name = block.get("id"), block.get("name")
                    reply.calls.append(
                        Call(
                            call_id if isinstance(call_id, str) else "",
                            name if isinstance(name, str) else "",
                            "",
                            (*path, "content", k, "id"),
                            (*path, "content", k, "name"),
                        )
                    )
                elif block.get("type") == "text":
                    texts.append(block.get("text") or "")
            reply.text = content if isinstance(content, str) else "\n".join(texts)
            if reply.calls or reply.text.strip():
                conv.replies.append(reply)
            continue
        if role == "system":
            if conv.task is None:
                systems.append(text_of(content))
            continue
        for k, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = block.get("tool_use_id")
                if isinstance(call_id, str):
                    output = text_of(block.get("content"))
                    conv.results.append(
                        Result(pos, (*path, "content", k, "content"), call_id, output)
                    )
        text = text_of(content)
        if text:
            conv.users[pos] = text
            if conv.task is None:
                conv.task = text
    conv.system = "\n".join(systems)
    return fold_greeting(conv)


# ---- the answer

SIGNATURE_MARK = b"rp1:"  # the decoded start of the proxy's own thinking signatures


def signature(thinking: str) -> str:
    return base64.b64encode(SIGNATURE_MARK + hashlib.sha256(thinking.encode()).digest()).decode()


def is_own_signature(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return base64.b64decode(value, validate=True).startswith(SIGNATURE_MARK)
    except ValueError:
        return False


def _usage(turn: Turn, output: int | None = None) -> dict[str, Any]:
    """Anthropic counts input read from or written to a cache apart from the rest of it."""
    u = turn.usage or NO_USAGE
    return {
        "input_tokens": max(0, u.input - u.cached - u.cache_write),
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cached,
        "output_tokens": u.output if output is None else output,
    }


def _thinking_wanted(request: dict[str, Any]) -> bool:
    thinking = request.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


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
                "id": tool_use_id(call.id),
                "name": call.name,
                "input": arguments_object(
                    turn, i, "the Anthropic API takes only objects as tool_use input"
                ),
                **call.served_with("anthropic"),  # as recorded: its caller, its toolset
            }
        )
    return out


def _stop_reason(turn: Turn) -> str:
    return "end_turn" if turn.final else "tool_use"


def _message(
    model: str, key: str, content: list[Any], stop: str | None, usage: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": derived("msg_01", key, length=22),
        "type": "message",
        "role": "assistant",
        "model": model or "replay",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {**usage, "service_tier": "standard"},
    }


def message_object(turn: Turn, request: dict[str, Any], *, key: str, model: str) -> bytes:
    """The answer as one message object; `model`: the request's (in its body, or its URL)."""
    return orjson.dumps(
        _message(model, key, blocks(turn, request), _stop_reason(turn), _usage(turn))
    )


def message_events(turn: Turn, request: dict[str, Any], *, key: str, model: str) -> list[bytes]:
    content = blocks(turn, request)
    events: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        events.append(
            f"event: {kind}\ndata: ".encode() + orjson.dumps({"type": kind, **data}) + b"\n\n"
        )

    # as the API streams it: the input at the start, one output token so far
    emit("message_start", message=_message(model, key, [], None, _usage(turn, 1)))
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
            start = {**block, "input": {}}  # with what it was recorded with (its caller...)
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
        usage=_usage(turn),
    )
    emit("message_stop")
    return events


# ---- on the way upstream


def splice(messages: list[Any], plan: tuple[Insertion, ...]) -> list[Any]:
    """A user message right before the insertion point (tool results) takes the text as extra
    blocks, so that roles keep alternating; otherwise a new user message goes in."""

    def put(out: list[Any], group: list[Insertion]) -> None:
        before = out[-1] if out else None
        if isinstance(before, dict) and before.get("role") == "user":
            for insertion in group:
                content = out[-1].get("content")
                blocks = (
                    [{"type": "text", "text": content}]
                    if isinstance(content, str)
                    else list(content or [])
                )
                out[-1] = {**out[-1], "content": [*blocks, *_texts(insertion)]}
        else:
            for insertion in reversed(group):  # of two at one place, the later one goes first
                out.append({"role": "user", "content": _texts(insertion)})

    return spliced(messages, plan, put)


def _texts(insertion: Insertion) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text_of(u.content)} for u in insertion.users]


def clean(messages: list[Any]) -> list[Any] | None:
    """Thinking blocks with the proxy's signature would be rejected by the real API."""
    changed = False
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and isinstance(content, list)
        ):
            kept = [
                b
                for b in content
                if not (
                    isinstance(b, dict)
                    and b.get("type") == "thinking"
                    and is_own_signature(b.get("signature"))
                )
            ]
            if len(kept) != len(content):
                message = {**message, "content": kept}
                changed = True
        out.append(message)
    return out if changed else None


# ---- an answer read back


def read_answer(raw: bytes, *, stream: bool) -> Assembled:
    """The message object (rebuilt from the events for a stream) and its turn in chat form."""
    events = sse_events(raw) if stream else None
    body: dict[str, Any] | None = None
    try:
        if events is None:
            loaded = orjson.loads(raw)
            body = loaded if isinstance(loaded, dict) and loaded.get("type") == "message" else None
        else:
            body = _anthropic_from_events(events)
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, ValueError):
        body = None
    if body is None or not isinstance(body.get("content"), list):
        return Assembled(None, None, None, events)
    chat, _ = messages_to_chat([{"role": "assistant", "content": body["content"]}], "response")
    return Assembled(chat[0], body.get("stop_reason"), body.get("usage"), events, native=body)


def _anthropic_from_events(events: list[str]) -> dict[str, Any] | None:
    message: dict[str, Any] | None = None
    partial: dict[int, list[str]] = {}
    # the text and thinking deltas of each block, joined once the stream is read (a string added
    # to per delta is quadratic: a long answer comes in thousands of them)
    texts: dict[tuple[int, str], tuple[dict[str, Any], list[str]]] = {}
    for block in events:
        data = event_data(block)
        if not data:
            continue
        event = orjson.loads(data)
        kind = event.get("type")
        if kind == "message_start":
            message = dict(event["message"])
            message["content"] = []
        elif message is None:
            continue
        elif kind == "content_block_start":
            message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            target, delta = message["content"][event["index"]], event["delta"]
            if delta.get("type") == "text_delta":
                _add(texts, target, "text", delta["text"])
            elif delta.get("type") == "thinking_delta":
                _add(texts, target, "thinking", delta["thinking"])
            elif delta.get("type") == "signature_delta":
                target["signature"] = delta["signature"]
            elif delta.get("type") == "input_json_delta":
                partial.setdefault(event["index"], []).append(_piece(delta["partial_json"]))
        elif kind == "content_block_stop" and event["index"] in partial:
            text = "".join(partial.pop(event["index"]))
            message["content"][event["index"]]["input"] = orjson.loads(text) if text else {}
        elif kind == "message_delta":
            message.update(event.get("delta") or {})
            message["usage"] = {**(message.get("usage") or {}), **(event.get("usage") or {})}
    for (_, field), (target, pieces) in texts.items():
        target[field] = "".join(pieces)
    return message


def _add(
    texts: dict[tuple[int, str], tuple[dict[str, Any], list[str]]],
    target: dict[str, Any],
    field: str,
    piece: Any,
) -> None:
    """A delta for a block's field, kept until the stream is read; the block's own start first."""
    key = (id(target), field)  # the block stays alive in `texts`: its id is not reused
    if key not in texts:
        texts[key] = (target, [_piece(target.get(field, ""))])
    texts[key][1].append(_piece(piece))


def _piece(piece: Any) -> str:
    """A piece of a streamed string, which must be text, as adding it to one required."""
    if not isinstance(piece, str):
        raise TypeError(f'can only concatenate str (not "{type(piece).__name__}") to str')
    return piece


# ---- errors

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
}


def error_body(body: dict[str, Any], status: int) -> dict[str, Any]:
    """An OpenAI-shaped error as Anthropic's clients parse it: {"type": "error", "error": {...}}."""
    return {"type": "error", "error": {**body["error"], "type": _TYPES.get(status, "api_error")}}


# ---- ids

_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")


def tool_use_id(recorded: str) -> str:
    """Anthropic accepts tool_use ids of letters, digits, _ and - only: any other recorded id gets
    a stable stand-in, and the engine compares what comes back with that same stand-in."""
    if _ID.fullmatch(recorded):
        return recorded
    return "toolu_" + hashlib.sha256(recorded.encode()).hexdigest()[:24]
