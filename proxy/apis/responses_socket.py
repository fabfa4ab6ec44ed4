"""The Responses API over a WebSocket (GET /v1/responses, upgraded): a frame read into the body
an HTTP call would have sent, and the frames the proxy writes itself. Pure.

A client sends `response.create` frames: the body of POST /v1/responses with a `type`, and
without `stream` (a socket always streams). Two things only a socket has:
- `generate: false`, a warm-up: answered at once with an empty response whose id the next frame
  may continue from; no model is asked and no turn is taken;
- `previous_response_id` naming the socket's last response, when the frame carries only the
  items added since: the conversation is that response's input and output, then the new items.
  As with the API itself for `store: false`, only the last response of the socket can be named.
The answer to each frame is the events its SSE stream carries, one JSON text frame each; an error
is one frame, {"type": "error", "status": N, "error": {...}}, and the socket stays open.
`response.processed` acknowledges a response and needs no answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.apis.request import loads_object
from proxy.apis.responses import empty_response
from proxy.errors import BadRequest
from proxy.replay.ids import derived

CREATE = "response.create"
ACKNOWLEDGED = frozenset({"response.processed"})  # a client's receipt: nothing to answer
# the events after which a response is over (a stream that ends before one broke off)
TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})
# what a socket's frame may not hold: the transport decides these
_TRANSPORT = ("type", "generate", "stream", "stream_options")


class PreviousNotFound(BadRequest):
    code = "previous_response_not_found"


@dataclass(slots=True)
class Chain:
    """What a socket keeps to continue from: its last response's id, and the conversation up to
    and including that response's output."""

    last: str | None = None
    items: list[Any] = field(default_factory=list)
    size: int = 0  # bytes of the last request's body: what a continuation's will hold at least

    def remember(self, rid: str, body: dict[str, Any], output: list[Any], size: int) -> None:
        self.last = rid
        self.items = [*body["input"], *output]
        self.size = size


@dataclass(frozen=True, slots=True)
class Frame:
    body: dict[str, Any]  # as POST /v1/responses would have carried it, streamed
    generate: bool  # False: a warm-up


def read_frame(raw: bytes | str, chain: Chain) -> Frame | None:
    """A client's frame as a request body (None: an acknowledgement, nothing to answer)."""
    data = loads_object(raw.encode() if isinstance(raw, str) else raw)
    kind = data.get("type")
    if kind in ACKNOWLEDGED:
        return None
    if kind != CREATE:
        raise BadRequest(
            f"a frame of type {kind!r}: over a WebSocket the proxy takes 'response.create' "
            "frames (and 'response.processed' receipts)",
            param="type",
        )
    generate = data.get("generate", True)
    if not isinstance(generate, bool):
        raise BadRequest("'generate' must be true or false", param="generate")
    if data.get("background") is True:
        raise BadRequest("'background' is not supported over a WebSocket", param="background")
    if data.get("stream_id") is not None:
        raise BadRequest(
            "'stream_id': the proxy does not multiplex conversations on one socket; open a "
            "socket per conversation",
            param="stream_id",
        )
    body = {k: v for k, v in data.items() if k not in _TRANSPORT}
    items = body.get("input", [])
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise BadRequest("'input' must be a string or an array of items", param="input")
    previous = body.pop("previous_response_id", None)
    if previous is not None:
        if previous != chain.last:
            raise PreviousNotFound(
                f"previous_response_id {str(previous)[:80]!r} is not this socket's last response "
                f"({chain.last or 'none yet'}): a socket continues from its last response only; "
                "send the whole input to start again",
                param="previous_response_id",
            )
        items = [*chain.items, *items]
    body["input"] = items
    body["stream"] = True
    return Frame(body, generate)


def warm_up(body: dict[str, Any], key: str, created: int) -> tuple[str, list[bytes]]:
    """A warm-up's answer: its response id, and the frames of an empty response."""
    rid = derived("resp_rpw", key)
    return rid, [
        orjson.dumps({"type": kind, "sequence_number": n, "response": response})
        for n, (kind, response) in enumerate(
            (
                ("response.created", empty_response(rid, body, created, done=False)),
                ("response.completed", empty_response(rid, body, created, done=True)),
            )
        )
    ]


def error_frame(status: int, body: Any) -> bytes:
    """An answer that is an error (the body of the HTTP answer it would have been), as a frame."""
    error = body.get("error", body) if isinstance(body, dict) else {"message": str(body)}
    return orjson.dumps({"type": "error", "status": status, "error": error})


def completed_output(data: bytes | str) -> tuple[str, list[Any]] | None:
    """The id and output of a `response.completed` event's response, else None."""
    event = orjson.loads(data)
    response = event.get("response") if isinstance(event, dict) else None
    if not isinstance(response, dict) or not isinstance(response.get("id"), str):
        return None
    output = response.get("output")
    return response["id"], output if isinstance(output, list) else []
