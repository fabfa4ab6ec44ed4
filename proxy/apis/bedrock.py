"""Anthropic's models on Amazon Bedrock (POST /model/{model}/invoke, and
/model/{model}/invoke-with-response-stream for a stream): the Anthropic Messages API with the model
in the URL, `anthropic_version: bedrock-2023-05-31` in the body, and a stream's events each in a
frame of the AWS event stream encoding (proxy.apis.eventstream): a `chunk` event whose JSON payload
holds the Anthropic event's JSON, base64-encoded, in `bytes`. Errors are `{"message": ...}`.
Claude Code sends this with CLAUDE_CODE_USE_BEDROCK and ANTHROPIC_BEDROCK_BASE_URL (the proxy's
root); it also asks GET /inference-profiles first, and takes an error there.

The rest is Anthropic's: its module reads and writes the bodies.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

import orjson

from proxy.apis import anthropic
from proxy.apis.eventstream import BadFrame, message, messages
from proxy.apis.framing import Framing
from proxy.apis.readback import Assembled, event_data, sse_events
from proxy.replay.conversation import Conversation

PREFIX = "/model/"
INVOKE, STREAM = "/invoke", "/invoke-with-response-stream"
CONTENT_TYPE = b"application/vnd.amazon.eventstream"
# Bedrock's control plane, which Claude Code asks on the same base URL
CONTROL = ("/inference-profiles", "/foundation-models")
_CHUNK = (
    (":event-type", "chunk"),
    (":content-type", "application/json"),
    (":message-type", "event"),
)


def serves(path: str) -> bool:
    """A completion: InvokeModel, or InvokeModelWithResponseStream."""
    return path.startswith(PREFIX) and path.endswith((INVOKE, STREAM))


def claims(path: str) -> bool:
    """Bedrock's other requests (count-tokens, the inference profiles), forwarded as its own."""
    return path.startswith(PREFIX) or path.startswith(CONTROL)


def target(conv: Conversation, path: str, query: str) -> None:
    """The model (an id, or an ARN with its slashes) and the streaming, from the URL."""
    conv.stream = path.endswith(STREAM)
    conv.model = path[len(PREFIX) : -len(STREAM if conv.stream else INVOKE)]


def frame(events: Sequence[bytes]) -> list[bytes]:
    """Each SSE event as Bedrock sends it: its data in a chunk message."""
    out = []
    for block in sse_events(b"".join(events)):
        data = event_data(block)
        if data:
            payload = {"bytes": base64.b64encode(data.encode()).decode()}
            out.append(message(_CHUNK, orjson.dumps(payload)))
    return out


def unframe(raw: bytes) -> bytes:
    """A Bedrock stream as the Anthropic SSE events it carries; an exception message (Bedrock's
    error mid-stream) becomes the Messages API's error event."""
    out = []
    for headers, payload in messages(raw):
        kind = headers.get(":message-type")
        if kind == "event" and headers.get(":event-type") == "chunk":
            data = _chunk_data(payload)
            try:
                loaded = orjson.loads(data)
            except orjson.JSONDecodeError:
                raise BadFrame("a Bedrock chunk whose `bytes` are not a JSON event") from None
            name = loaded.get("type", "message") if isinstance(loaded, dict) else "message"
            out.append(f"event: {name}\ndata: ".encode() + data + b"\n\n")
        elif kind in ("exception", "error"):
            error = {"type": headers.get(":exception-type") or headers.get(":error-code", "error")}
            error["message"] = _message_of(payload)
            out.append(b"event: error\ndata: " + orjson.dumps({"type": "error", "error": error}))
            out.append(b"\n\n")
    return b"".join(out)


def _chunk_data(payload: bytes) -> bytes:
    try:
        encoded = orjson.loads(payload)["bytes"]
        return base64.b64decode(encoded, validate=True)
    except (orjson.JSONDecodeError, KeyError, TypeError, binascii.Error):
        raise BadFrame("a Bedrock chunk without base64 `bytes` in a JSON payload") from None


def _message_of(payload: bytes) -> str:
    try:
        loaded = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload.decode("utf-8", errors="replace")
    return str(loaded.get("message", loaded)) if isinstance(loaded, dict) else str(loaded)


FRAMING = Framing(CONTENT_TYPE, frame, unframe)


def read_answer(raw: bytes, *, stream: bool) -> Assembled:
    """The answer read back as Anthropic's (a stream unframed first); a stream that cannot be
    unframed is read as no message, with why in its one event."""
    if not stream:
        return anthropic.read_answer(raw, stream=False)
    try:
        events = unframe(raw)
    except BadFrame as exc:
        return Assembled(None, None, None, [f"unreadable event stream: {exc.message}"])
    return anthropic.read_answer(events, stream=True)


def error_body(body: dict[str, Any], status: int) -> dict[str, Any]:
    """An OpenAI-shaped error as Bedrock writes one: {"message": ...}."""
    return {"message": body["error"]["message"]}
