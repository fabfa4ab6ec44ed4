"""PassThrough: an upstream answer sent on to the client as it arrives, and what it was.

Status and headers go out as the upstream sent them (hop-by-hop ones dropped), the body piece by
piece with no buffering. A client that leaves closes the upstream connection at once (a watcher on
`receive`), so an abandoned stream stops costing tokens. An answer that breaks off is never made to
look whole: a stream gets a final error event, any other body is cut (the connection closes).

When the answer is recorded or dumped (`keep_body`), a copy is kept, up to a limit, and the end of
the answer waits until `on_complete` is done: a dump is on disk before the client can see the last
event. Only the end waits: a stream's final event (`[DONE]`, `response.completed`,
`message_stop`) and what follows it, or the last piece of any other body.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.upstream.headers import answer_headers

log = logging.getLogger("proxy.upstream")


@dataclass(slots=True)
class Captured:
    """What went through a PassThrough, for the metrics, the recorder and the dumper."""

    status: int
    content_type: str
    limit: int = 0  # bytes of the body kept at most; 0: none (nothing records it)
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0  # bytes of body passed on
    over_limit: bool = False  # the body was larger than `limit`: none of it is kept
    first_byte: float | None = None  # time.perf_counter() of the first body piece
    finished: float | None = None  # time.perf_counter() when the upstream was done
    error: str | None = None  # the stream broke off, or the client left
    complete: bool = False

    def keep(self, chunk: bytes) -> None:
        """A copy that grows linearly and stops at the limit (then it is dropped whole)."""
        self.size += len(chunk)
        if self.over_limit:
            return
        if self.size > self.limit:
            self.over_limit = True
            self.chunks.clear()
            return
        self.chunks.append(chunk)

    def body(self) -> bytes:
        return b"".join(self.chunks)


OnComplete = Callable[[Captured], Awaitable[None]]

# The final event of a stream, in each API
_TERMINAL = (b"data: [DONE]", b"event: response.completed", b"event: message_stop")
_OVERLAP = max(len(m) for m in _TERMINAL) - 1  # a marker may start in the previous piece


class _Holdback:
    """Splits the body into what goes out now and what waits for on_complete."""

    __slots__ = ("held", "holding", "sse", "tail")

    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self.held: list[bytes] = []
        self.holding = False
        self.tail = b""  # the end of what went out, for a marker split between two pieces

    def take(self, chunk: bytes) -> bytes:
        if self.holding:
            self.held.append(chunk)
            return b""
        if not self.sse:  # the previous piece goes out; this one waits, as it may be the last
            out = self.held.pop() if self.held else b""
            self.held.append(chunk)
            return out
        window = self.tail + chunk
        for marker in _TERMINAL:
            at = window.find(marker)
            if at >= 0:
                cut = max(0, at - len(self.tail))  # what went out cannot end an event by itself
                self.holding = True
                self.held.append(chunk[cut:])
                return chunk[:cut]
        self.tail = window[-_OVERLAP:]
        return chunk

    def rest(self) -> bytes:
        return b"".join(self.held)


class PassThrough(Response):
    """An ASGI response that sends `answer` on and always closes it. `whole` is the whole body
    when it was read already (a sized answer); else it is streamed."""

    def __init__(
        self,
        answer: aiohttp.ClientResponse,
        *,
        whole: bytes | None = None,
        on_complete: OnComplete | None = None,
        keep_body: bool = False,
        secret: bytes | None = None,
        copy_limit: int = 0,
    ) -> None:
        self.answer = answer
        self.whole = whole
        self.status_code = answer.status
        self.background = None
        headers, self.content_type = answer_headers(answer.raw_headers)
        headers.append((b"x-replay-source", b"upstream"))
        self.raw_headers = headers
        self.is_sse = self.content_type.startswith("text/event-stream")
        self.on_complete = on_complete
        # an error body could echo the proxy's own key: held whole and masked
        self.keep_body = keep_body or (secret is not None and answer.status >= 400)
        self.secret = secret
        self.copy_limit = copy_limit if keep_body else 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        captured = Captured(self.status_code, self.content_type, self.copy_limit)
        if self.whole is not None:
            await self._send_whole(self.whole, send, captured)
        else:
            await self._stream(receive, send, captured)

    async def _send_whole(self, body: bytes, send: Send, captured: Captured) -> None:
        captured.first_byte = captured.finished = time.perf_counter()
        if self.copy_limit:
            captured.keep(body)
        if self.on_complete is not None:
            captured.complete = True
            await self.on_complete(captured)
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        await send({"type": "http.response.body", "body": self._masked(body)})

    async def _stream(self, receive: Receive, send: Send, captured: Captured) -> None:
        answer = self.answer
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            answer.close()  # the upstream connection closes now, mid-answer if need be

        watcher = asyncio.ensure_future(watch())
        reported = False
        holdback = _Holdback(self.is_sse) if self.keep_body else None
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            try:
                await self._relay(send, captured, holdback)
            except (TimeoutError, aiohttp.ClientError) as exc:
                if gone:
                    return
                reason = f"the upstream stream broke off: {_why(exc)}"
                log.warning(reason)
                captured.error = reason
                if not self.is_sse:
                    raise BrokenAnswer(reason) from None  # the client sees a cut answer
                if holdback is None:
                    holdback = _Holdback(True)
                error = {
                    "error": {
                        "message": reason,
                        "type": "upstream_error",
                        "code": "upstream_stream_broken",
                    }
                }
                holdback.held.append(b"data: " + orjson.dumps(error) + b"\n\n")
            captured.finished = time.perf_counter()
            if self.on_complete is not None:
                captured.complete = captured.error is None
                reported = True
                await self.on_complete(captured)
            rest = self._masked(holdback.rest()) if holdback is not None else b""
            await send({"type": "http.response.body", "body": rest, "more_body": False})
        finally:
            watcher.cancel()  # it ends at its next step, inside receive(): nothing left to close
            answer.close()  # a no-op once the whole body was read: the connection is pooled again
            if self.on_complete is not None and not reported:
                captured.error = captured.error or "the client disconnected before the end"
                captured.finished = captured.finished or time.perf_counter()
                await asyncio.shield(self.on_complete(captured))

    async def _relay(self, send: Send, captured: Captured, holdback: _Holdback | None) -> None:
        """Each piece as it arrives (all that has arrived, in one send)."""
        read = self.answer.content.readany
        chunk = await read()
        if chunk:
            captured.first_byte = time.perf_counter()
        plain = holdback is None and self.secret is None  # the usual case: nothing per piece
        while chunk:
            if not plain:
                if self.copy_limit:
                    captured.keep(chunk)
                if holdback is not None:
                    chunk = holdback.take(chunk)
                chunk = self._masked(chunk)
            if chunk:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            chunk = await read()

    def _masked(self, data: bytes) -> bytes:
        secret = self.secret
        if secret is not None and secret in data:
            return data.replace(secret, b"*" * len(secret))  # the same length: content-length holds
        return data


class BrokenAnswer(Exception):
    """Raised out of the ASGI app to make the server cut an answer that broke off (the only way
    ASGI has): its status line and length said more was coming."""


def _why(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return "no data from the upstream within the read timeout"
    if isinstance(exc, asyncio.TimeoutError):
        return "no whole answer within the total timeout"
    return str(exc) or type(exc).__name__
