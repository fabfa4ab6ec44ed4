"""The OpenAI Responses API (/v1/responses): a request body read into a Conversation, a
scripted turn written as a response object or its named SSE events, the conversation made fit for
the real API, and an answer read back.

The history is the `input` list: consecutive assistant-side items (reasoning, an assistant message,
function calls, item references) are one assistant reply; function_call_output items are tool
results, matched by call_id. An item with a role and no type is a message. `instructions` and
system or developer messages before the task are the system prompt.

Event order as a real server sends it: response.created, response.in_progress; per output item
(reasoning, message, each function call, in that order) output_item.added, its parts and deltas,
output_item.done; response.completed with the full output and usage. No [DONE]. Checked against
the openai SDK's responses.stream, opencode's AI SDK parser and Codex's (which run tools from
output_item.done and need response.completed's id). The arguments string is served verbatim and
byte-identical everywhere it appears; call_id is the recorded tool-call id. A turn's recorded
tokens (proxy.replay.tokens) are served as NeMo-Gym's rollouts hold them, on the done form of the
item that ends the call, and OpenAI's logprobs on its output_text part and text events.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from proxy.apis.readback import Assembled, event_data, sse_events
from proxy.apis.request import malformed, opened, spliced, tool_names
from proxy.apis.responses_history import (
    ASSISTANT_SIDE,  # one rule for what makes up a reply
    items_to_chat,
)
from proxy.errors import BadRequest
from proxy.replay.content import text_of
from proxy.replay.conversation import Call, Conversation, Reply, Result, fold_greeting
from proxy.replay.ids import derived
from proxy.replay.splice import Insertion
from proxy.replay.trajectory import ToolCall, Turn
from proxy.replay.usage import NO_USAGE

# ---- the request


def parse_responses(body: Any) -> Conversation:
    items, model = opened(body, "input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise BadRequest("'input' must be a string or an array of items", param="input")
    choice = body.get("tool_choice")
    conv = Conversation(  # positional: keyword arguments cost as much as the rest of __init__
        "responses",
        model,
        body.get("stream") is True,
        False,  # include_usage
        tool_names(body.get("tools")),
        choice == "none" or (isinstance(choice, dict) and choice.get("type") == "none"),
        len(items),  # message_count
    )
    instructions = body.get("instructions")
    systems = [instructions] if isinstance(instructions, str) and instructions else []
    reply: Reply | None = None
    texts: list[str] = []  # the non-empty message texts of `reply`, joined once when it ends
    for pos, item in enumerate(items):
        path = ("input", pos)
        if not isinstance(item, dict):
            raise malformed(path, "must be an object")
        kind = item.get("type", "message" if "role" in item else None)
        role = item.get("role")
        if kind in ASSISTANT_SIDE or (kind == "message" and role == "assistant"):
            if reply is None:
                reply = Reply(pos, path, "", [], ("input", f"[{pos}:]"), pos)
                conv.replies.append(reply)
            reply.end = pos
            if kind == "function_call":
                call_id, name, args = item.get("call_id"), item.get("name"), item.get("arguments")
                reply.calls.append(
                    Call(
                        call_id if isinstance(call_id, str) else "",
                        name if isinstance(name, str) else "",
                        args if isinstance(args, str) else "",
                        (*path, "call_id"),
                        (*path, "name"),
                    )
                )
            elif kind == "message":
                text = text_of(item.get("content"))
                if text:
                    texts.append(text)
            continue
        if reply is not None and texts:
            reply.text = "\n".join(texts)
            texts = []
        reply = None
        if kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if isinstance(call_id, str):
                conv.results.append(Result(pos, (*path, "output"), call_id, text_of(output)))
        elif kind == "message":
            text = text_of(item.get("content"))
            if role in ("system", "developer"):
                if conv.task is None:
                    systems.append(text)
            elif role == "user":
                conv.users[pos] = text
                if conv.task is None:
                    conv.task = text
    if reply is not None and texts:
        reply.text = "\n".join(texts)
    conv.replies = [r for r in conv.replies if r.calls or r.text.strip()]
    conv.system = "\n".join(systems)
    return fold_greeting(conv)


# ---- the answer

REASONING_MARK = "rp1."  # prefixes the proxy's own encrypted_content, stripped before forwarding
OWN_ID_PREFIXES = ("rs_rp1", "msg_rp1", "fc_rp1", "resp_rp1")  # ids the proxy made up


def _usage(turn: Turn) -> dict[str, Any]:
    u = turn.usage or NO_USAGE
    return {
        "input_tokens": u.input,
        "input_tokens_details": {"cached_tokens": u.cached},
        "output_tokens": u.output,
        "output_tokens_details": {"reasoning_tokens": u.reasoning},
        "total_tokens": u.input + u.output,
    }


def _envelope(
    rid: str,
    request: dict[str, Any],
    created: int,
    status: str,
    output: list[Any],
    done: bool,
    turn: Turn | None = None,
) -> dict[str, Any]:
    given = request.get("reasoning")
    reasoning: dict[str, Any] = given if isinstance(given, dict) else {}
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "completed_at": created if done else None,
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "max_tool_calls": None,
        "model": request.get("model") or "replay",
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "prompt_cache_key": request.get("prompt_cache_key"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": None,
        "service_tier": "default",
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools") or [],
        "top_logprobs": 0,
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": _usage(turn) if done and turn is not None else None,
        "user": None,
        "metadata": request.get("metadata") or {},
    }


def empty_response(
    rid: str, request: dict[str, Any], created: int, *, done: bool
) -> dict[str, Any]:
    """A response with no output (a WebSocket warm-up's), in progress or completed."""
    envelope = _envelope(rid, request, created, "completed" if done else "in_progress", [], done)
    if done:
        envelope["usage"] = _usage(Turn(0, -1, "", None, ()))
    return envelope


class _Items:
    """The output items of one turn, in their in-progress and final forms."""

    def __init__(self, turn: Turn, key: str, request: dict[str, Any]) -> None:
        self.turn = turn
        self.rs = derived("rs_rp1", key, "rs") if turn.reasoning else None
        self.msg = derived("msg_rp1", key, "msg") if turn.text else None
        self.fcs = [(derived("fc_rp1", key, i), c) for i, c in enumerate(turn.tool_calls)]
        include = request.get("include")
        self.encrypted = isinstance(include, list) and "reasoning.encrypted_content" in include
        tokens = turn.tokens
        self.entries = tokens.entries if tokens is not None else None
        # NeMo-Gym's fields go on the item that ends the call (its converter's response_output[-1])
        self.ending = tokens.nemo_gym() if tokens is not None else {}
        self.last = self.fcs[-1][0] if self.fcs else self.msg or self.rs

    def ended(self, item: dict[str, Any], done: bool) -> dict[str, Any]:
        """The item, with the call's token fields if it ends the call and is done."""
        if done and self.ending and item["id"] == self.last:
            item.update(self.ending)
        return item

    def reasoning(self, done: bool) -> dict[str, Any]:
        assert self.rs is not None and self.turn.reasoning is not None
        text = self.turn.reasoning
        item: dict[str, Any] = {
            "id": self.rs,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": text}] if done else [],
        }
        if self.encrypted:  # opaque to clients, which send it back; marked as the proxy's own
            item["encrypted_content"] = (
                REASONING_MARK + base64.urlsafe_b64encode(text.encode()).decode()
            )
        return self.ended(item, done)

    def message(self, done: bool) -> dict[str, Any]:
        content = [_output_text(self.turn.text, self.entries)] if done else []
        status = "completed" if done else "in_progress"
        item = {
            "id": self.msg,
            "type": "message",
            "status": status,
            "content": content,
            "role": "assistant",
        }
        return self.ended(item, done)

    def call(self, fc: str, call: ToolCall, done: bool) -> dict[str, Any]:
        item = {
            "id": fc,
            "type": "function_call",
            "status": "completed" if done else "in_progress",
            "arguments": call.arguments if done else "",
            "call_id": call.id,
            "name": call.name,
        }
        if call.dispatch:  # as recorded: Codex dispatches a namespaced call by its namespace
            item.update(call.served_with("responses"))
        return self.ended(item, done)

    def output(self) -> list[dict[str, Any]]:
        out = [self.reasoning(True)] if self.rs else []
        if self.msg:
            out.append(self.message(True))
        out.extend(self.call(fc, c, True) for fc, c in self.fcs)
        return out


def _output_text(text: str, entries: list[Any] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "annotations": [], "logprobs": entries or [], "text": text}


def response_object(turn: Turn, request: dict[str, Any], *, key: str, created: int) -> bytes:
    """The non-streaming body."""
    items = _Items(turn, key, request)
    return orjson.dumps(
        _envelope(
            derived("resp_rp1", key), request, created, "completed", items.output(), True, turn
        )
    )


def response_events(turn: Turn, request: dict[str, Any], *, key: str, created: int) -> list[bytes]:
    """The SSE events, one bytes object each."""
    rid = derived("resp_rp1", key)
    items = _Items(turn, key, request)
    events: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        payload = {"type": kind, "sequence_number": len(events), **data}
        events.append(f"event: {kind}\ndata: ".encode() + orjson.dumps(payload) + b"\n\n")

    emit("response.created", response=_envelope(rid, request, created, "in_progress", [], False))
    emit(
        "response.in_progress", response=_envelope(rid, request, created, "in_progress", [], False)
    )
    index = 0
    if items.rs:
        text = turn.reasoning or ""
        where = {"item_id": items.rs, "output_index": index, "summary_index": 0}
        emit("response.output_item.added", output_index=index, item=items.reasoning(False))
        emit(
            "response.reasoning_summary_part.added",
            **where,
            part={"type": "summary_text", "text": ""},
        )
        emit("response.reasoning_summary_text.delta", **where, delta=text)
        emit("response.reasoning_summary_text.done", **where, text=text)
        emit(
            "response.reasoning_summary_part.done",
            **where,
            part={"type": "summary_text", "text": text},
        )
        emit("response.output_item.done", output_index=index, item=items.reasoning(True))
        index += 1
    if items.msg:
        text = turn.text
        where = {"item_id": items.msg, "output_index": index, "content_index": 0}
        emit("response.output_item.added", output_index=index, item=items.message(False))
        emit("response.content_part.added", **where, part=_output_text(""))
        entries = items.entries or []
        emit("response.output_text.delta", **where, delta=text, logprobs=entries)
        emit("response.output_text.done", **where, text=text, logprobs=entries)
        emit("response.content_part.done", **where, part=_output_text(text, entries))
        emit("response.output_item.done", output_index=index, item=items.message(True))
        index += 1
    for fc, call in items.fcs:
        emit("response.output_item.added", output_index=index, item=items.call(fc, call, False))
        emit(
            "response.function_call_arguments.delta",
            item_id=fc,
            output_index=index,
            delta=call.arguments,
        )
        emit(
            "response.function_call_arguments.done",
            item_id=fc,
            output_index=index,
            name=call.name,
            arguments=call.arguments,
        )
        emit("response.output_item.done", output_index=index, item=items.call(fc, call, True))
        index += 1
    emit(
        "response.completed",
        response=_envelope(rid, request, created, "completed", items.output(), True, turn),
    )
    return events


# ---- on the way upstream


def splice(items: list[Any], plan: tuple[Insertion, ...]) -> list[Any]:
    def put(out: list[Any], group: list[Insertion]) -> None:
        for insertion in reversed(group):  # of two at one place, the later one goes first
            out.extend(
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": text_of(u.content)}],
                }
                for u in insertion.users
            )

    return spliced(items, plan, put)


def clean(items: list[Any]) -> list[Any] | None:
    """Reasoning items and item ids the proxy made up mean nothing to the real API."""
    changed = False
    out = []
    for item in items:
        if isinstance(item, dict):
            kind, ident = item.get("type"), item.get("id")
            own = isinstance(ident, str) and ident.startswith(OWN_ID_PREFIXES)
            encrypted = item.get("encrypted_content")
            if kind in ("reasoning", "item_reference") and (
                own or (isinstance(encrypted, str) and encrypted.startswith(REASONING_MARK))
            ):
                changed = True
                continue
            if own:
                item = {k: v for k, v in item.items() if k != "id"}
                changed = True
        out.append(item)
    return out if changed else None


# ---- an answer read back


def read_answer(raw: bytes, *, stream: bool) -> Assembled:
    """The response object (from response.completed for a stream) and its turn in chat form."""
    events = sse_events(raw) if stream else None
    body: Any = None
    try:
        if events is None:
            body = orjson.loads(raw)
        else:
            for block in events:
                data = event_data(block)
                if data and '"response.completed"' in data:
                    body = orjson.loads(data).get("response")
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("output"), list):
        return Assembled(None, None, None, events)
    chat, _ = items_to_chat(body["output"], "response")
    message = next((m for m in chat if m.get("role") == "assistant"), None)
    finish = "tool_calls" if message and message.get("tool_calls") else "stop"
    return Assembled(message, finish, body.get("usage"), events, native=body)
