"""A request body read through FastAPI's Request: refused at its declared length, or once it
grows past the limit, and never taken whole when the client left half-way."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import Request

from proxy.errors import ClientClosedRequest, PayloadTooLarge
from proxy.http.body import read_body


def request(messages: list[dict[str, Any]], headers: dict[str, str] | None = None) -> Request:
    scope = {
        "type": "http",
        "method": "PUT",
        "path": "/replay/sessions/s1/script",
        "headers": [(k.encode(), v.encode()) for k, v in (headers or {}).items()],
        "query_string": b"",
    }
    pending = list(messages)

    async def receive() -> dict[str, Any]:
        return pending.pop(0)

    return Request(scope, receive)


def body(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.request", "body": data, "more_body": more}


async def test_a_body_in_pieces_is_read_whole() -> None:
    got = await read_body(request([body(b'[{"role"', True), body(b': "user"}]')]), limit=100)
    assert got == b'[{"role": "user"}]'


async def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    with pytest.raises(PayloadTooLarge, match="has 5000 bytes; the limit is 100"):
        await read_body(request([], {"content-length": "5000"}), limit=100)


async def test_a_body_that_grows_past_the_limit_is_refused() -> None:
    pieces = [body(b"x" * 60, True), body(b"x" * 60)]
    with pytest.raises(PayloadTooLarge, match="over the limit of 100 bytes"):
        await read_body(request(pieces, {"content-length": "50"}), limit=100)


async def test_a_body_of_exactly_the_limit_is_taken() -> None:
    assert await read_body(request([body(b"x" * 100)]), limit=100) == b"x" * 100


async def test_a_client_that_leaves_half_way_is_never_taken_for_a_whole_body() -> None:
    with pytest.raises(ClientClosedRequest, match="before the request body was complete"):
        await read_body(request([body(b"[1,", True), {"type": "http.disconnect"}]), limit=100)
