"""Incoming: one HTTP request as the hot path needs it, read straight from the ASGI scope.

The completion endpoints and forwarding do not go through FastAPI's request machinery: method,
path, query, headers and the body (bounded) are all they read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from starlette.types import Receive, Scope

from proxy.errors import BadRequest, PayloadTooLarge


@dataclass(slots=True)
class Incoming:
    method: str
    path: str
    query: str
    raw_headers: list[tuple[bytes, bytes]]
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes

    def json(self) -> dict[str, Any]:
        try:
            body = orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise BadRequest(f"the request body is not valid JSON: {exc}") from None
        if not isinstance(body, dict):
            raise BadRequest("the request body must be a JSON object")
        return body


async def receive_request(scope: Scope, receive: Receive, limit: int) -> Incoming:
    raw = scope["headers"]
    # ASGI servers give header names in lower case (the spec says so): decoded, not lowered
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in raw}
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body has {declared} bytes; the limit is {limit}")
    message = await receive()
    body = message.get("body", b"")
    if message.get("more_body", False):  # a body in pieces: gathered, within the limit
        chunks = [body]
        size = len(body)
        while message.get("more_body", False):
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
            chunks.append(chunk)
        body = b"".join(chunks)
    if len(body) > limit:
        raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
    query = scope["query_string"].decode("latin-1")
    return Incoming(scope["method"], scope["path"], query, raw, headers, body)
