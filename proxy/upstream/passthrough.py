"""PassThrough: an upstream answer sent on to the client as it arrives, and what it was.

Status and headers go out as the upstream sent them (hop-by-hop ones dropped), the body piece by
piece with no buffering. A client that leaves closes the upstream connection at once (a watcher on
`receive`), so an abandoned stream stops costing tokens. An answer that breaks off is never made to
look whole: a stream gets a final error event, any other body is cut (the connection closes).

When the answer is recorded or dumped (`keep_body`), a copy is kept, up to a limit, and the end of
the answer waits until `on_complete` is done: a dump is on disk before the client can see the last
event. Only the end waits: a stream's final event (`[DONE]`, `response.completed`,
`message_stop`, counted only at the start of a line: a JSON string in a `data:` line cannot hold a
raw newline, so a model's text quoting a marker never ends the stream) and what follows it, or the
last piece of any other body.

With the proxy's own upstream key set, the key is masked (asterisks, the same length) across the
pieces: the end of a piece that may begin the key waits for the next piece, or the end.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

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


class Body(Protocol):
    async def readany(self) -> bytes: ...


class Answer(Protocol):
    """What is passed on: aiohttp's ClientResponse, or an upstream socket's answer as the SSE
    stream it stands for (proxy.upstream.socket). `close` ends it at once, mid-answer too."""

    @property
    def status(self) -> int: ...
    @property
    def raw_headers(self) -> tuple[tuple[bytes, bytes], ...]: ...
    @property
    def content(self) -> Body: ...
    def close(self) -> None: ...


# The final event of a stream, in each API: only at the start of a line (after \n or \r)
_TERMINAL = (b"data: [DONE]", b"event: response.completed", b"event: message_stop")
_AT_LINE_START = re.compile(b"[\r\n](?:" + b"|".join(re.escape(m) for m in _TERMINAL) + b")")
_TAIL = max(len(m) for m in _TERMINAL)  # a newline and a marker but its last byte


class _Holdback:
    """Splits the body into what goes out now and what waits for on_complete."""

    __slots__ = ("held", "holding", "sse", "tail")

    def __init__(self, sse: bool) -> None:
        self.sse = sse
        self.held: list[bytes] = []
        self.holding = False
        # the end of what went out, for a marker (or the newline before it) split between two
        # pieces; the body's start counts as a line start
        self.tail = b"\n"

    def take(self, chunk: bytes) -> bytes:
        if self.holding:
            self.held.append(chunk)
            return b""
        if not self.sse:  # the previous piece goes out; this one waits, as it may be the last
            out = self.held.pop() if self.held else b""
            self.held.append(chunk)
            return out
        window = self.tail + chunk
        found = _AT_LINE_START.search(window)
        if found is not None:
            # the marker starts after the newline; what went out cannot end an event by itself
            cut = max(0, found.start() + 1 - len(self.tail))
            self.holding = True
            self.held.append(chunk[cut:])
            return chunk[:cut]
        self.tail = window[-_TAIL:]
        return chunk

    def rest(self) -> bytes:
        return b"".join(self.held)


class _Mask:
    """The secret as asterisks in a body that comes in pieces: the end of a piece that may begin
    the secret waits for the next piece (or the end) to tell."""

    __slots__ = ("pending", "secret", "stars")

    def __init__(self, secret: bytes) -> None:
        self.secret = secret
        self.stars = b"*" * len(secret)  # the same length: content-length holds
        self.pending = b""  # masked already where a whole secret was; at most len(secret) - 1

    def feed(self, piece: bytes, last: bool = False) -> bytes:
        data = self.pending + piece if self.pending else piece
        if self.secret in data:
            data = data.replace(self.secret, self.stars)
        keep = 0 if last else _begins_secret(data, self.secret)
        self.pending = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep] if keep else data


def _begins_secret(data: bytes, secret: bytes) -> int:
    """The length of the longest end of `data` that is a start of `secret` (not all of it)."""
    first = secret[:1]
    at = data.find(first, max(0, len(data) - len(secret) + 1))
    while at >= 0:  # only the last len(secret) - 1 bytes are looked at: no per-body cost
        if secret.startswith(data[at:]):
            return len(data) - at
        at = data.find(first, at + 1)
    return 0


class PassThrough(Response):
    """An ASGI response that sends `answer` on and always closes it. `whole` is the whole body
    when it was read already (a sized answer); else it is streamed."""

    def __init__(
        self,
        answer: Answer,
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
        self.raw_headers = headers
        self.is_sse = self.content_type.startswith("text/event-stream")
        self.on_complete = on_complete
        self.keep_body = keep_body
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
        if self.secret is not None:
            body = _Mask(self.secret).feed(body, last=True)
        await send({"type": "http.response.body", "body": body})

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
        mask = _Mask(self.secret) if self.secret is not None else None
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            try:
                await self._relay(send, captured, holdback, mask)
            except (TimeoutError, aiohttp.ClientError) as exc:
                if gone:
                    return
                reason = f"the upstream stream broke off: {_why(exc)}"
                log.warning(reason)
                captured.error = reason
                if not self.is_sse:
                    if mask is not None and mask.pending:  # a start of the key, never completed
                        last = mask.feed(b"", last=True)
                        await send({"type": "http.response.body", "body": last, "more_body": True})
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
            rest = holdback.rest() if holdback is not None else b""
            if mask is not None:
                rest = mask.feed(rest, last=True)  # with what waited to be told from the key
            await send({"type": "http.response.body", "body": rest, "more_body": False})
        finally:
            watcher.cancel()  # it ends at its next step, inside receive(): nothing left to close
            answer.close()  # a no-op once the whole body was read: the connection is pooled again
            if self.on_complete is not None and not reported:
                captured.error = captured.error or "the client disconnected before the end"
                captured.finished = captured.finished or time.perf_counter()
                await asyncio.shield(self.on_complete(captured))

    async def _relay(
        self, send: Send, captured: Captured, holdback: _Holdback | None, mask: _Mask | None
    ) -> None:
        """Each piece as it arrives (all that has arrived, in one send)."""
        read = self.answer.content.readany
        chunk = await read()
        if chunk:
            captured.first_byte = time.perf_counter()
        plain = holdback is None and mask is None  # the usual case: nothing per piece
        while chunk:
            if not plain:
                if self.copy_limit:
                    captured.keep(chunk)
                if holdback is not None:
                    chunk = holdback.take(chunk)
                if mask is not None and chunk:
                    chunk = mask.feed(chunk)
            if chunk:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            chunk = await read()


class BrokenAnswer(Exception):
    """Raised out of the ASGI app to make the server cut an answer that broke off (the only way
    ASGI has): its status line and length said more was coming."""


def _why(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return "no data from the upstream within the read timeout"
    if isinstance(exc, asyncio.TimeoutError):
        return "no whole answer within the total timeout"
    return str(exc) or type(exc).__name__
