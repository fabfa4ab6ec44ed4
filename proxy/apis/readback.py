"""An answer as it went over the wire, read back: the assistant message it carried; and what
writing one may refuse.

Used for recordings and dumps: a JSON completion is read as it is; an SSE stream is split into
its events and put back together the way the SDKs do it (each API's `read_answer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.errors import ProxyError
from proxy.replay.trajectory import Turn

# ---- writing answers


class Unservable(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "unservable_turn"


def arguments_object(turn: Turn, index: int, why: str) -> dict[str, Any]:
    """A call's recorded arguments, parsed, for an API that takes them only as a JSON object."""
    call = turn.tool_calls[index]
    value = orjson.loads(call.arguments)
    if not isinstance(value, dict):
        raise Unservable(
            f"scripted turn {turn.number}: the arguments of {call.name} call {call.id} are not a JSON "
            f"object, and {why}"
        )
    return value


# ---- reading answers back


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
