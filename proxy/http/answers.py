"""Answers the proxy makes itself (a scripted turn, a recorded exchange replayed): SSE streams
through sse-starlette's EventSourceResponse, event by event; JSON in one piece.

The events are rendered once, as the bytes the SDKs parse (proxy.apis), and sent as they are.
`on_complete` runs before the last event (or the JSON body) is sent, as for a forwarded answer, so
a recording line is on its way before the client sees the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from sse_starlette import EventSourceResponse
from sse_starlette.sse import AppStatus
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.errors import PROXY_HEADERS

SSE = b"text/event-stream; charset=utf-8"
JSON = b"application/json"

# sse-starlette cuts every open stream at SIGTERM by default. A scripted stream lasts
# milliseconds, and one cut short would end an agent's turn as if it were whole: the server's
# graceful shutdown (--shutdown-timeout) lets them finish instead.
AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]

OnComplete = Callable[[], Awaitable[None]]
_OWN = tuple((name.encode(), value.encode()) for name, value in PROXY_HEADERS.items())


def own_headers(
    headers: list[tuple[bytes, bytes]], source: bytes, *more: tuple[bytes, bytes]
) -> list[tuple[bytes, bytes]]:
    """The headers of an answer the proxy made itself: the request's own (the session), the ones
    every such answer carries (x-should-retry: false), where it came from, and `more`."""
    return [*headers, *_OWN, (b"x-replay-source", source), *more]


def rendered(
    parts: Sequence[bytes],
    headers: list[tuple[bytes, bytes]],
    *,
    content_type: bytes = SSE,
    status: int = 200,
    on_complete: OnComplete | None = None,
) -> Response:
    if content_type.startswith(b"text/event-stream"):
        # no keep-alive pings: the events are all in memory, and a ping would also hide a
        # stall that a test injects on purpose
        events = EventSourceResponse(_events(parts, on_complete), status_code=status, ping=0)
        events.raw_headers.extend(headers)
        return events
    return Whole(b"".join(parts), headers, content_type, status, on_complete)


async def _events(parts: Sequence[bytes], on_complete: OnComplete | None) -> AsyncIterator[bytes]:
    last = len(parts) - 1
    for i, part in enumerate(parts):
        if i == last and on_complete is not None:
            await on_complete()
        yield part
    if last < 0 and on_complete is not None:
        await on_complete()


class Whole(Response):
    """A JSON (or other) body in one send, headers written once."""

    def __init__(
        self,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        content_type: bytes,
        status: int,
        on_complete: OnComplete | None,
    ) -> None:
        self.body = body
        self.status_code = status
        self.background = None
        self.on_complete = on_complete
        self.raw_headers = [
            (b"content-type", content_type),
            (b"content-length", str(len(body)).encode()),
            *headers,
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.on_complete is not None:
            await self.on_complete()
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send({"type": "http.response.body", "body": self.body})
