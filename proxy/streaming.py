"""Rendered: an ASGI response for an answer the proxy made itself (a scripted or replayed turn).

SSE events go out one body message each; `on_complete` runs before the end of the answer is sent,
like PassThrough's, so a recording line is on its way before the client sees the end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

SSE = b"text/event-stream; charset=utf-8"
JSON = b"application/json"


class Rendered(Response):
    def __init__(
        self,
        parts: Sequence[bytes],
        headers: list[tuple[bytes, bytes]],
        *,
        content_type: bytes = SSE,
        status: int = 200,
        on_complete: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.parts = parts
        self.status_code = status
        self.background = None
        self.on_complete = on_complete
        self.raw_headers = [(b"content-type", content_type), *headers]
        if content_type == SSE:
            self.raw_headers.append((b"cache-control", b"no-cache"))
        else:
            self.raw_headers.append((b"content-length", str(sum(len(p) for p in parts)).encode()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        if self.on_complete is None and len(self.parts) == 1:  # a JSON answer: one more send
            await send({"type": "http.response.body", "body": self.parts[0]})
            return
        for part in self.parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})
        if self.on_complete is not None:
            await self.on_complete()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
