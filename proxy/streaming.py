"""EventStream: an ASGI response for a scripted SSE turn, one body message per event."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.responses import Response
from starlette.types import Receive, Scope, Send


class EventStream(Response):
    def __init__(self, events: Sequence[bytes], headers: list[tuple[bytes, bytes]]) -> None:
        self.events = events
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            *headers,
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        for event in self.events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
