"""Answers the proxy makes itself (a scripted turn, a recorded exchange replayed): SSE streams and
JSON, each rendered once, as the bytes the SDKs parse (proxy.apis), and sent as they are.

Every event of a scripted stream is in memory before the first is sent, so nothing waits between
two of them: the stream goes out as one chunk of the chunked body, with the headers sse-starlette's
EventSourceResponse writes. An SSE client splits events on blank lines, not on reads, so it parses
the same events in the same order; what it saves is one socket write per event, which was most of
a scripted stream's cost (the profile in docs/performance.md). EventSourceResponse (a task group
and a disconnect listener per response) stays for streams that wait between events
(proxy.http.faulted: a stall), where each event must leave when it is due.

`on_complete` runs before the body is sent, as a forwarded answer's does before its end, so a
recording line is on its way before the client sees the end.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from sse_starlette.sse import AppStatus
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.errors import PROXY_HEADERS

SSE = b"text/event-stream; charset=utf-8"

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
        return Events(parts, headers, content_type, status, on_complete)
    return Whole(b"".join(parts), headers, content_type, status, on_complete)


# what EventSourceResponse sends with every stream (and no keep-alive pings: nothing waits)
_SSE_HEADERS = (
    (b"cache-control", b"no-store"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
)


class Events(Response):
    """An SSE stream whose events are all in memory: the head, then the events in one body
    message (uvicorn frames it as one chunk and ends the body in the same write). A client that
    has left makes the server drop what is sent, so there is nothing to listen for."""

    def __init__(
        self,
        parts: Sequence[bytes],
        headers: list[tuple[bytes, bytes]],
        content_type: bytes,
        status: int,
        on_complete: OnComplete | None,
    ) -> None:
        self.body = b"".join(parts)
        self.status_code = status
        self.background = None
        self.on_complete = on_complete
        self.raw_headers = [(b"content-type", content_type), *_SSE_HEADERS, *headers]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.on_complete is not None:  # before the end is released, as for a forwarded answer
            await self.on_complete()
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send({"type": "http.response.body", "body": self.body})


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
