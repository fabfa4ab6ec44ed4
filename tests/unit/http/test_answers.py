"""A scripted stream as the server is handed it: the recording's on_complete first, then the head
with the headers sse-starlette writes, then every event, in order, in one body message."""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.http.answers import SSE, rendered


def test_the_events_go_in_order_in_one_body_message_after_on_complete() -> None:
    sent: list[dict[str, Any]] = []
    order: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        order.append(message["type"])

    async def receive() -> dict[str, Any]:
        raise AssertionError("a stream in memory listens for nothing")

    async def done() -> None:
        order.append("on_complete")

    parts = [b"data: 1\n\n", b"data: 2\n\n", b"data: [DONE]\n\n"]
    answer = rendered(parts, [(b"x-replay-source", b"scripted")], on_complete=done)
    asyncio.run(answer({"type": "http"}, receive, send))
    head, *bodies = sent
    assert dict(head["headers"]) == {
        b"content-type": SSE,
        b"cache-control": b"no-store",
        b"connection": b"keep-alive",
        b"x-accel-buffering": b"no",
        b"x-replay-source": b"scripted",
    }
    assert [b["body"] for b in bodies] == [b"".join(parts)]
    assert bodies[0].get("more_body", False) is False
    assert order == ["on_complete", "http.response.start", "http.response.body"]


def test_an_empty_stream_still_ends() -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        raise AssertionError

    asyncio.run(rendered([], [])({"type": "http"}, receive, send))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[-1].get("more_body", False) is False
