"""Reading a request body: bounded in size, parsed with orjson, errors that say what was wrong."""

from __future__ import annotations

from fastapi import Request
from starlette.requests import ClientDisconnect

from proxy.errors import ClientClosedRequest, PayloadTooLarge


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body has {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # a half body is never taken for a whole one
        raise ClientClosedRequest(
            "the client closed the connection before the request body was complete"
        ) from None
    return b"".join(chunks)
