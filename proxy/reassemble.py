"""A response as it went over the wire -> the assistant message it carried.

Used for recordings and dumps: a JSON completion is read as it is; an SSE stream is split into its
events and the chat deltas are put back together the way the SDKs do it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.formats.anthropic import messages_to_chat
from proxy.formats.responses import items_to_chat


@dataclass(slots=True)
class Assembled:
    message: dict[str, Any] | None  # the assistant message, in chat form
    finish_reason: str | None
    usage: Any
    events: list[str] | None  # the raw SSE events (each without its blank line), for streams
    head: dict[str, Any] | None = None  # id, created and model of a stream's first chunk
    native: dict[str, Any] | None = None  # the API's own final object (Responses, Anthropic)

    def completion(self) -> dict[str, Any] | None:
        """The whole answer as one object: a chat.completion (rebuilt from a stream), or the
        Responses API response / Anthropic message object."""
        if self.native is not None:
            return self.native
        if self.message is None:
            return None
        head = self.head or {}
        return {
            "id": head.get("id"),
            "object": "chat.completion",
            "created": head.get("created"),
            "model": head.get("model"),
            "choices": [{"index": 0, "message": self.message, "finish_reason": self.finish_reason}],
            "usage": self.usage,
        }


def sse_events(raw: bytes) -> list[str]:
    """Split an SSE body into event blocks; tolerant of \\r\\n and of a missing last blank line."""
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return [block for block in text.split("\n\n") if block.strip()]


def event_data(block: str) -> str | None:
    lines = [line[5:].removeprefix(" ") for line in block.split("\n") if line.startswith("data:")]
    return "\n".join(lines) if lines else None


def chat_response(raw: bytes, *, stream: bool) -> Assembled:
    if not stream:
        try:
            body = orjson.loads(raw)
            choice = body["choices"][0]
            return Assembled(
                choice.get("message"), choice.get("finish_reason"), body.get("usage"), None
            )
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            return Assembled(None, None, None, None)
    events = sse_events(raw)
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: Any = None
    head: dict[str, Any] | None = None
    for block in events:
        data = event_data(block)
        if data is None or data == "[DONE]":
            continue
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(chunk, dict):
            continue
        if head is None:
            head = {k: chunk.get(k) for k in ("id", "created", "model")}
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
            for part in delta.get("tool_calls") or []:
                entry = calls.setdefault(
                    part.get("index", len(calls)),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                entry["id"] = part.get("id") or entry["id"]
                fn = part.get("function") or {}
                entry["function"]["name"] += fn.get("name") or ""
                entry["function"]["arguments"] += fn.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return Assembled(message, finish, usage, events, head)


def responses_response(raw: bytes, *, stream: bool) -> Assembled:
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


def anthropic_response(raw: bytes, *, stream: bool) -> Assembled:
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
    partial: dict[int, str] = {}
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
                target["text"] = target.get("text", "") + delta["text"]
            elif delta.get("type") == "thinking_delta":
                target["thinking"] = target.get("thinking", "") + delta["thinking"]
            elif delta.get("type") == "signature_delta":
                target["signature"] = delta["signature"]
            elif delta.get("type") == "input_json_delta":
                partial[event["index"]] = partial.get(event["index"], "") + delta["partial_json"]
        elif kind == "content_block_stop" and event["index"] in partial:
            text = partial.pop(event["index"])
            message["content"][event["index"]]["input"] = orjson.loads(text) if text else {}
        elif kind == "message_delta":
            message.update(event.get("delta") or {})
            message["usage"] = {**(message.get("usage") or {}), **(event.get("usage") or {})}
    return message
