"""The upstream leg of a client's WebSocket: its live turns sent on a socket of their own to the
upstream's /responses (aiohttp's client), where the upstream takes one.

One upstream socket per client socket (a Link), opened at the first live turn with the headers an
HTTP request would carry (the proxy's key, the per-session header lines, the Via mark) and closed
with the client's socket. The first turn sends the whole input in a `response.create` frame; a
later one sends only the items added since, with `previous_response_id` naming the upstream's own
last response, when the input begins with exactly what this socket holds (that response's input
and output); anything else is sent whole. The upstream's events come back as the SSE stream an
HTTP answer would have been (`event: TYPE` / `data: JSON`), so that the recording, the metrics
and the client's socket take them unchanged; an `error` frame before any event is the HTTP error
answer it stands for. Each frame waits at most the read timeout, the whole answer at most the
total timeout; a socket that drops mid-answer breaks the answer off, as a dropped HTTP stream does.

An upgrade the upstream refuses (any status but 101) raises Refused, for the caller to decide
(proxy.http.relay: HTTP instead, or the turn's error).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from proxy.errors import UpstreamBadAnswer, UpstreamError, UpstreamUnreachable
from proxy.upstream.client import Upstream
from proxy.upstream.dialect import Dialect
from proxy.upstream.passthrough import OnComplete, PassThrough

log = logging.getLogger("proxy.upstream")

CREATE = "response.create"
TERMINAL = frozenset({"response.completed", "response.failed", "response.incomplete", "error"})
_NOT_SENT = ("stream", "background")  # over a socket, the transport decides these
# an error the upstream answers a frame with before doing anything: the frame may be sent again,
# whole, on this socket (its last response is gone) or on a new one (this one is used up)
_FORGOTTEN = "previous_response_not_found"
_USED_UP = "websocket_connection_limit_reached"
_HANDSHAKE_ONLY = frozenset({"content-type", "content-length"})
_OFF_LOOP = 256 * 1024  # a body larger than this is parsed in a thread
_SSE = ((b"content-type", b"text/event-stream; charset=utf-8"),)
_JSON = ((b"content-type", b"application/json"),)


_PASSING = frozenset({408, 429})  # refusals that say "not now" rather than "not here"


def _server(url: str) -> str:
    """Where a URL's server is: its scheme, host and port."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Refused(Exception):
    """The upstream answered the upgrade with `status`, not 101: it takes no socket there."""

    def __init__(self, upstream: str, url: str, status: int) -> None:
        super().__init__(f"the upstream {upstream} refused a WebSocket on {url} (HTTP {status})")
        self.where = url
        self.status = status


class Link:
    """A client socket's socket to the upstream, opened at its first live turn; one turn at a
    time (the client's socket answers one frame at a time)."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.key: tuple[Any, ...] | None = None  # where it goes, with which headers
        self.last: str | None = None  # the upstream's last response id on this socket
        self.items: list[Any] = []  # that response's input and output
        self.turns = 0  # live turns sent on sockets of this link
        self._closing: set[asyncio.Task[Any]] = set()

    async def answer(
        self,
        raw_path: str,
        query: str,
        headers: Iterable[tuple[bytes, bytes]],
        body: bytes,
        *,
        on_complete: OnComplete | None = None,
        keep_body: bool = False,
        values: Mapping[str, str] | None = None,
        dialect: Dialect,
        parsed: dict[str, Any] | None = None,
    ) -> PassThrough:
        """The turn's answer from the upstream's socket; Refused, or an UpstreamError (as HTTP
        would give) when there is none. `parsed`: the body as an object, when the caller has it
        (else it is read here)."""
        upstream = self.upstream
        url, forwarded = upstream.outgoing(raw_path, query, headers, values=values, dialect=dialect)
        url = url.with_scheme("wss" if url.scheme == "https" else "ws")
        forwarded = [h for h in forwarded if h[0].lower() not in _HANDSHAKE_ONLY]
        data = parsed
        if data is None:
            data = orjson.loads(body) if len(body) <= _OFF_LOOP else await _parsed(body)
        deadline = None
        if upstream.total_timeout is not None:
            deadline = time.monotonic() + upstream.total_timeout
        retried = False
        while True:
            ws = await self._open(url, forwarded)
            frame, delta = self.frame(data)
            try:
                await ws.send_str(orjson.dumps(frame).decode())
            except (aiohttp.ClientError, OSError) as exc:
                self.drop()
                raise upstream.failed(exc) from None
            self.turns += 1
            try:
                first = await self.next(ws, deadline)
            except (TimeoutError, aiohttp.ClientError) as exc:
                self.drop()
                raise self._unanswered(exc) from None
            event = _event(first)
            if event.get("type") != "error":
                head = _Answer(self, ws, first, deadline, data.get("input"))
                return upstream.pass_on(head, on_complete=on_complete, keep_body=keep_body)
            error = event.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            if not retried and ((code == _FORGOTTEN and delta) or code == _USED_UP):
                retried = True  # nothing was generated: sent again, whole
                log.info(
                    "the upstream %s said %s: the turn is sent again whole", upstream.name, code
                )
                self.forget()
                if code == _USED_UP:
                    self.drop()
                continue
            status = event.get("status")
            if not isinstance(status, int) or not 400 <= status <= 599:
                status = 502
            whole = orjson.dumps({"error": error if error is not None else event})
            return upstream.pass_on(
                _Head(status, _JSON), whole=whole, on_complete=on_complete, keep_body=keep_body
            )

    def refused(self, values: Mapping[str, str] | None) -> bool:
        """This upstream's server refused a socket before, for good."""
        return _server(self.upstream.where(values or {})) in self.upstream.no_socket

    def fall_back(self, refused: Refused, values: Mapping[str, str] | None) -> None:
        """HTTP instead: for this turn when the refusal may pass (a 5xx, a 429, a 408), else for
        this upstream's server from now on, for every client socket, said once. Kept by server,
        not by URL: a per-session upstream has as many URLs as sessions."""
        if refused.status >= 500 or refused.status in _PASSING:
            log.warning("%s: this live turn goes over HTTP SSE", refused)
            return
        server = _server(self.upstream.where(values or {}))
        if server not in self.upstream.no_socket:
            self.upstream.no_socket.add(server)
            log.warning("%s: its live turns go over HTTP SSE from now on", refused)

    def frame(self, data: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The `response.create` frame for this request body, and whether it continues the
        socket's last response (only the new items) rather than sending the whole input."""
        frame = {"type": CREATE, **{k: v for k, v in data.items() if k not in _NOT_SENT}}
        items, have = data.get("input"), self.items
        if (
            self.last is not None
            and "previous_response_id" not in data
            and isinstance(items, list)
            and len(items) >= len(have)
            and items[: len(have)] == have
        ):
            frame["input"] = items[len(have) :]
            frame["previous_response_id"] = self.last
            return frame, True
        return frame, False

    def remember(self, rid: str, items: Any, output: Any) -> None:
        if isinstance(items, list) and isinstance(output, list):
            self.last, self.items = rid, [*items, *output]
        else:
            self.forget()

    def forget(self) -> None:
        self.last, self.items = None, []

    async def next(self, ws: aiohttp.ClientWebSocketResponse, deadline: float | None) -> str:
        """The upstream's next frame; a TimeoutError past the read (or total) timeout, a
        ClientConnectionError when the socket closed."""
        wait = self.upstream.read_timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            wait = min(wait, left)
        try:
            message = await ws.receive(wait)
        except TimeoutError:
            if deadline is not None and wait < self.upstream.read_timeout:
                raise  # the total timeout
            raise aiohttp.SocketTimeoutError from None  # the read timeout
        if message.type is aiohttp.WSMsgType.TEXT:
            text: str = message.data
            return text
        if message.type is aiohttp.WSMsgType.BINARY:
            raw: bytes = message.data
            return raw.decode("utf-8", "replace")
        raise aiohttp.ClientConnectionError(
            f"the upstream closed its WebSocket (code {ws.close_code})"
        )

    async def _open(
        self, url: Any, forwarded: list[tuple[str, str]]
    ) -> aiohttp.ClientWebSocketResponse:
        key = (str(url), tuple(forwarded))
        ws = self.ws
        if ws is not None and (self.key != key or ws.closed or await _went_away(ws)):
            self.drop()
            ws = None
        if ws is not None:
            return ws
        upstream = self.upstream
        try:
            ws = await upstream.client().ws_connect(
                url,
                headers=forwarded,
                proxy=upstream.proxy,
                autoclose=True,
                autoping=True,
                max_msg_size=0,  # an answer is bounded by the copy limit, as over HTTP
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=5.0),
            )
        except aiohttp.WSServerHandshakeError as exc:
            if exc.status == 101:  # switched, but not to a socket aiohttp could take
                raise UpstreamBadAnswer(
                    f"the upstream {upstream.name} answered the WebSocket upgrade on "
                    f"{_shown(url)} with a handshake that does not hold: {exc.message}"
                ) from None
            raise Refused(upstream.name, _shown(url), exc.status) from None
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise upstream.failed(exc) from None
        self.ws, self.key = ws, key
        self.forget()  # a new socket holds no response yet
        return ws

    def _unanswered(self, exc: BaseException) -> UpstreamError:
        if isinstance(exc, aiohttp.ClientConnectionError) and not isinstance(exc, TimeoutError):
            return UpstreamUnreachable(
                f"the upstream {self.upstream.name} closed its WebSocket without answering; the "
                "request may have reached it, so it was not sent again"
            )
        return self.upstream.failed(exc)

    def drop(self) -> None:
        """Let the socket go (mid-answer too: its state is unknown); the next turn opens
        another and sends the whole input."""
        ws, self.ws, self.key = self.ws, None, None
        self.forget()
        if ws is not None and not ws.closed:
            task = asyncio.ensure_future(ws.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """With the client's socket."""
        self.drop()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class _Head:
    """An answer that is all head: its body is given whole."""

    def __init__(self, status: int, headers: tuple[tuple[bytes, bytes], ...]) -> None:
        self.status = status
        self.raw_headers = headers
        self.content = self

    async def readany(self) -> bytes:
        return b""

    def close(self) -> None:
        pass


class _Answer(_Head):
    """The upstream socket's events for one turn, read as an SSE body: one event per read."""

    def __init__(
        self,
        link: Link,
        ws: aiohttp.ClientWebSocketResponse,
        first: str,
        deadline: float | None,
        items: Any,
    ) -> None:
        super().__init__(200, _SSE)
        self.link = link
        self.ws = ws
        self.first: str | None = first
        self.deadline = deadline
        self.items = items
        self.done = False

    async def readany(self) -> bytes:
        if self.done:
            return b""
        text, self.first = self.first, None
        if text is None:
            text = await self.link.next(self.ws, self.deadline)
        event = _event(text)
        kind = event.get("type")
        if kind == "response.completed":
            response = event.get("response")
            if isinstance(response, dict) and isinstance(response.get("id"), str):
                self.link.remember(response["id"], self.items, response.get("output"))
        if kind in TERMINAL:
            self.done = True
        return _sse(text, event)

    def close(self) -> None:
        if not self.done:  # the client left, or the answer broke off: the socket is not reused
            self.done = True
            self.link.drop()


def _event(text: str) -> dict[str, Any]:
    try:
        event = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return event if isinstance(event, dict) else {}


def _sse(text: str, event: dict[str, Any]) -> bytes:
    """The event as a starlette SSE stream writes it."""
    data = text.encode()
    if b"\n" in data or b"\r" in data:  # pretty-printed: one line, as an SSE data line must be
        data = orjson.dumps(event)
    kind = event.get("type")
    head = (
        b"event: " + kind.encode() + b"\n" if isinstance(kind, str) and kind.isprintable() else b""
    )
    return head + b"data: " + data + b"\n\n"


async def _went_away(ws: aiohttp.ClientWebSocketResponse) -> bool:
    """What the upstream sent while the socket sat idle, read before a turn is sent on it: a
    close (an idle limit, a restart) means a new socket; a stray frame is dropped."""
    while True:
        try:
            message = await ws.receive(1e-6)  # what is queued only: no wait
        except TimeoutError:
            return False
        if message.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
            return True
        log.debug("the upstream sent a frame between turns: %.200s", message.data)


async def _parsed(body: bytes) -> dict[str, Any]:
    data: dict[str, Any] = await asyncio.to_thread(orjson.loads, body)
    return data


def _shown(url: Any) -> str:
    return str(url.with_user(None).with_password(None).with_query(None))
