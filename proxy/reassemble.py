"""A response as it went over the wire -> the assistant message it carried.

Used for recordings and dumps: a JSON completion is read as it is; an SSE stream is split into its
events and the chat deltas are put back together the way the SDKs do it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(slots=True)
class Assembled:
    message: dict[str, Any] | None  # the assistant message, in chat form
    finish_reason: str | None
    usage: Any
    events: list[str] | None  # the raw SSE events (each without its blank line), for streams
    head: dict[str, Any] | None = None  # id, created and model of a stream's first chunk

    def completion(self) -> dict[str, Any] | None:
        """The answer as a chat.completion object, whether it came as JSON or as a stream."""
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
