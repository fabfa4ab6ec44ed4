"""The HTTP/1.1 server protocol the proxy runs under uvicorn (passed as `http=`).

uvicorn still runs the process: sockets, workers, signals, lifespan, the Date header and graceful
shutdown. This replaces only its per-connection protocol, which cost a forwarded JSON request
about as much CPU as the proxy's own work: per request an object built from eleven keyword
arguments, an asyncio.Event, two regular expressions per response header, and a keep-alive timer
made and cancelled. Here a request is one small object, a response's headers are checked with one
search over all names and one over all values, and one timer per connection keeps the keep-alive
timeout. The behaviour is uvicorn's (httptools_impl), except: no WebSocket upgrades (an Upgrade
request, as `curl --http2` sends on http://, is served as plain HTTP, body included, where
uvicorn's loses the body, and its connection closes after the answer), no access log (the proxy
logs its own requests), and no --limit-concurrency (the proxy's CLI never sets it). A response's head is held for the first
piece of its body, so a small answer leaves in one write (one system call, one TCP segment),
and at the latest at the end of the event loop's turn.

Exceptions: an app that fails before it starts its response gets a 500; after, the connection
is closed. Bad HTTP gets a 400 and a closed connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import urllib.parse
from collections import deque
from typing import Any, cast

import httptools
from uvicorn.config import Config

# uvicorn's own status lines and header checks (only token characters in names, no control
# characters in values), so answers are written exactly as its protocol writes them
from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE
from uvicorn.server import ServerState

log = logging.getLogger("uvicorn.error")

HIGH_WATER = 65536  # a request body buffered beyond this pauses reading until the app takes it
_ASGI = {"version": "3.0", "spec_version": "2.3"}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_BAD_REQUEST = (
    b"content-type: text/plain; charset=utf-8\r\ncontent-length: 30\r\nconnection: close\r\n"
    b"\r\nInvalid HTTP request received."
)


class Protocol(asyncio.Protocol):
    """One client connection. Requests are answered in order: a pipelined request waits, with
    reading paused, until the one before it is answered."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not config.loaded:
            config.load()
        self.app = config.loaded_app
        # uvicorn's opt-in for https://github.com/python/cpython/issues/140947 (getattr: older
        # uvicorn has no such setting)
        self.fresh_context = bool(getattr(config, "reset_contextvars", False))
        self.loop = _loop or asyncio.get_event_loop()
        self.state = server_state
        self.app_state = app_state
        self.root_path = config.root_path
        self.keep_alive_timeout = config.timeout_keep_alive
        self.parser = _parser(self)
        self.transport: asyncio.Transport = cast(asyncio.Transport, None)
        self.scheme = "http"
        self.server: tuple[str, int] | None = None
        self.client: tuple[str, int] | None = None
        self.current: Request | None = None  # the request being answered
        self.waiting: deque[Request] = deque()  # pipelined behind it
        self.reading = True
        self.writable: asyncio.Future[None] | None = None  # set while the client's buffer is full
        self.quiet_since: float | None = None  # when the last answer ended; None: busy
        self.timer: asyncio.TimerHandle | None = None  # the keep-alive check
        self._defaults: list[tuple[bytes, bytes]] | None = None
        self._defaults_block = b""
        # the request being parsed
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.expect = False  # it sent Expect: 100-continue
        self.parsing: Request | None = None
        self.resuming: Request | None = None  # whose body is read past an Upgrade

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.state.connections.add(self)  # type: ignore[arg-type]
        if transport.get_extra_info("sslcontext"):
            self.scheme = "https"
        self.server = _address(transport.get_extra_info("sockname"))
        self.client = _address(transport.get_extra_info("peername"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.state.connections.discard(self)
        for request in (self.current, *self.waiting):
            if request is not None and not request.complete:
                request.disconnected = True
                request.wake()
        self.waiting.clear()
        self.resume_writing()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def data_received(self, data: bytes) -> None:
        self.quiet_since = None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            self._past_upgrade(data[exc.args[0] :])
        except httptools.HttpParserError as exc:
            log.warning("Invalid HTTP request received: %s", exc)
            if self.current is not None:
                self.current.flush()  # a held head goes first
            self.transport.write(
                STATUS_LINE[400] + self.default_headers() + _BAD_REQUEST  # as uvicorn's
            )
            self.transport.close()

    def _past_upgrade(self, rest: bytes) -> None:
        """llhttp stops at an Upgrade request (curl --http2 on http:// sends one) and calls its
        message complete before any body. There are no upgrades here: the request is answered
        as plain HTTP, and its body, if it has one, is read by a new parser given the request's
        framing headers. The connection closes after the answer (see on_headers_complete)."""
        request = self.parsing
        if request is None or request.complete or request.scope["method"] == "CONNECT":
            return
        framing = [h for h in self.headers if h[0] in (b"content-length", b"transfer-encoding")]
        if not framing:
            return
        request.more_body = True
        self.resuming = request
        self.parser = _parser(self)
        head = b"POST / HTTP/1.1\r\n%sconnection: close\r\n\r\n" % b"".join(
            b"%s: %s\r\n" % h for h in framing
        )
        self.data_received(head + rest)

    def eof_received(self) -> None:
        pass

    def pause_writing(self) -> None:
        if self.writable is None:
            self.writable = self.loop.create_future()

    def resume_writing(self) -> None:
        writable, self.writable = self.writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    # httptools callbacks

    def on_message_begin(self) -> None:
        self.url = b""
        self.headers = []
        self.expect = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        # llhttp keeps trailing whitespace, which is not part of the value (RFC 9110 5.5)
        value = value.rstrip(b" \t")
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect = True
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        if self.resuming is not None:  # the body of a request read past an Upgrade
            self.parsing, self.resuming = self.resuming, None
            return
        parser = self.parser
        url = httptools.parse_url(self.url)
        raw_path = url.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        version = parser.get_http_version()
        scope = {
            "type": "http",
            "asgi": _ASGI,
            "http_version": version,
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,
            "method": parser.get_method().decode("ascii"),
            "root_path": self.root_path,
            "path": self.root_path + path,
            "raw_path": self.root_path.encode("ascii") + raw_path,
            "query_string": url.query or b"",
            "headers": self.headers,
            "state": self.app_state.copy(),
        }
        expect, self.expect = self.expect, False
        # llhttp stops reading at an Upgrade (no upgrades here): the answer closes the connection
        keep_alive = version != "1.0" and parser.should_keep_alive() and not parser.should_upgrade()
        request = Request(self, scope, keep_alive, expect)
        self.parsing = request
        if self.current is None or self.current.complete:
            self._start(request)
        else:
            self.pause_reading()
            self.waiting.append(request)

    def on_body(self, body: bytes) -> None:
        request = self.parsing
        if request is None or request.complete:
            return
        request.body.append(body)
        request.buffered += len(body)
        if request.buffered > HIGH_WATER:
            self.pause_reading()
        request.wake()

    def on_message_complete(self) -> None:
        request = self.parsing
        if request is None or request.complete:
            return
        request.more_body = False
        request.wake()

    # the rest

    def _start(self, request: Request) -> None:
        self.current = request
        if self.fresh_context:
            task = self.loop.create_task(request.run(self.app), context=contextvars.Context())
        else:
            task = self.loop.create_task(request.run(self.app))
        request.task = task  # it takes itself out of the server's tasks when done
        self.state.tasks.add(task)

    def answered(self) -> None:
        """The current request's answer is complete."""
        self.state.total_requests += 1
        if self.transport.is_closing():
            return
        self.resume_reading()
        if self.waiting:
            self._start(self.waiting.popleft())
            return
        self.quiet_since = self.loop.time()
        if self.timer is None:
            self.timer = self.loop.call_later(self.keep_alive_timeout, self._check_quiet)

    def _check_quiet(self) -> None:
        self.timer = None
        if self.quiet_since is None:
            return  # busy: the end of its answer starts the clock again
        left = self.quiet_since + self.keep_alive_timeout - self.loop.time()
        if left > 0:
            self.timer = self.loop.call_later(left, self._check_quiet)
        elif not self.transport.is_closing():
            self.transport.close()

    def default_headers(self) -> bytes:
        """uvicorn's headers for every answer (Date), written out once per change (a second)."""
        headers = self.state.default_headers
        if headers is not self._defaults:
            self._defaults = headers
            self._defaults_block = b"".join(b"%s: %s\r\n" % h for h in headers)
        return self._defaults_block

    def pause_reading(self) -> None:
        if self.reading:
            self.reading = False
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if not self.reading:
            self.reading = True
            self.transport.resume_reading()

    def shutdown(self) -> None:
        """The server is stopping: close when idle, else after the answer in progress."""
        if self.current is None or self.current.complete:
            self.transport.close()
        else:
            self.current.keep_alive = False


class Request:
    """One request and its answer: the ASGI receive and send of its task."""

    __slots__ = (
        "body",
        "buffered",
        "chunked",
        "complete",
        "conn",
        "disconnected",
        "expect",
        "head",
        "keep_alive",
        "left",
        "more_body",
        "ready",
        "scope",
        "started",
        "task",
        "waiter",
    )

    def __init__(
        self, conn: Protocol, scope: dict[str, Any], keep_alive: bool, expect: bool
    ) -> None:
        self.conn = conn
        self.scope = scope
        self.keep_alive = keep_alive
        self.expect = expect  # a 100 Continue is owed before the body is read
        self.body: list[bytes] = []
        self.buffered = 0
        self.more_body = True
        self.ready = False  # something for receive() since it last returned
        self.waiter: asyncio.Future[None] | None = None
        self.disconnected = False
        self.started = False
        self.complete = False
        self.chunked = False
        self.left = 0  # bytes of a content-length body still to send
        self.head: bytes | None = None  # the response head, until the body's first write
        self.task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        self.ready = True
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def run(self, app: Any) -> None:
        try:
            result = await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            log.error("Exception in ASGI application\n", exc_info=exc)
            if not self.started:
                await self._fail()
            else:
                self.flush()
                self.conn.transport.close()
        else:
            if result is not None:
                log.error("ASGI callable should return None, but returned %r.", result)
                self.flush()
                self.conn.transport.close()
            elif not self.started and not self.disconnected:
                log.error("ASGI callable returned without starting response.")
                await self._fail()
            elif not self.complete and not self.disconnected:
                log.error("ASGI callable returned without completing response.")
                self.flush()
                self.conn.transport.close()
        finally:
            self.conn.state.tasks.discard(self.task)

    async def _fail(self) -> None:
        await self.send(
            {
                "type": "http.response.start",
                "status": 500,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", b"21"),
                    (b"connection", b"close"),
                ],
            }
        )
        await self.send({"type": "http.response.body", "body": b"Internal Server Error"})

    async def receive(self) -> dict[str, Any]:
        conn = self.conn
        if self.expect and not conn.transport.is_closing():
            conn.transport.write(_CONTINUE)
            self.expect = False
        if not self.disconnected and not self.complete:
            conn.resume_reading()
            if not self.ready:  # one future for all who wait; each leaves it alone if cancelled
                waiter = self.waiter
                if waiter is None:
                    waiter = self.waiter = conn.loop.create_future()
                await asyncio.shield(waiter)
            self.ready = False
        if self.disconnected or self.complete:
            return {"type": "http.disconnect"}
        body = b"".join(self.body)
        self.body = []
        self.buffered = 0
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    async def send(self, message: dict[str, Any]) -> None:
        conn = self.conn
        if conn.writable is not None and not self.disconnected:
            await asyncio.shield(conn.writable)  # a cancelled send leaves it for the others
        if self.disconnected:
            return
        kind = message["type"]
        if not self.started:
            if kind != "http.response.start":
                raise RuntimeError(
                    f"Expected ASGI message 'http.response.start', but got '{kind}'."
                )
            self.started = True
            self.expect = False
            self._head(message["status"], message.get("headers", ()))
            return
        if self.complete:
            raise RuntimeError(
                f"Unexpected ASGI message '{kind}' sent, after response already completed."
            )
        if kind != "http.response.body":
            raise RuntimeError(f"Expected ASGI message 'http.response.body', but got '{kind}'.")
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if self.scope["method"] == "HEAD":
            data = b""
            self.left = 0
        elif self.chunked:
            if body:
                data = (
                    b"%x\r\n%b\r\n" % (len(body), body)
                    if more
                    else b"%x\r\n%b\r\n0\r\n\r\n" % (len(body), body)
                )
            else:
                data = b"" if more else b"0\r\n\r\n"
        else:
            if len(body) > self.left:
                raise RuntimeError("Response content longer than Content-Length")
            self.left -= len(body)
            data = body
        head = self.head
        if head is not None:  # one write, one TCP segment, for a whole small answer
            self.head = None
            data = head + data
        if data:
            conn.transport.write(data)
        if not more:
            if self.left != 0:
                raise RuntimeError("Response content shorter than Content-Length")
            self.complete = True
            self.wake()
            if not self.keep_alive:
                conn.transport.close()
            conn.answered()

    def _head(self, status: int, headers: Any) -> None:
        lines = [STATUS_LINE[status], self.conn.default_headers()]
        at = 2
        length: int | None = None
        chunked = False
        close = False
        for name, value in headers:
            name = name.lower()
            if name == b"content-length" and length is None and not chunked:  # the first counts
                length = int(value)
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                chunked = True
                length = None
            elif name == b"connection" and b"close" in [
                t.strip() for t in value.lower().split(b",")
            ]:
                close = True
                self.keep_alive = False
            lines += (name, b": ", value, b"\r\n")
        if HEADER_RE.search(b"".join(lines[at::4])):
            raise RuntimeError("Invalid HTTP header name.")
        if HEADER_VALUE_RE.search(b"".join(lines[at + 2 :: 4])):
            raise RuntimeError("Invalid HTTP header value.")
        if not self.keep_alive and not close:
            lines.append(b"connection: close\r\n")
        bodiless = self.scope["method"] == "HEAD" or status in (204, 304)
        if length is None and not chunked and not bodiless:
            chunked = True
            lines.append(b"transfer-encoding: chunked\r\n")
        self.chunked = chunked
        self.left = length or 0
        lines.append(b"\r\n")
        # held for the first piece of the body, and at the latest to the end of this loop turn
        self.head = b"".join(lines)
        self.conn.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write the head if it is still held (a stream's headers go out before its body)."""
        head = self.head
        if head is not None:
            self.head = None
            if not self.conn.transport.is_closing():
                self.conn.transport.write(head)


def _parser(protocol: Protocol) -> httptools.HttpRequestParser:
    parser = httptools.HttpRequestParser(protocol)
    # as uvicorn: bytes after a Connection: close request are not an error before its answer
    with contextlib.suppress(AttributeError):  # httptools < 0.6.3 has no leniencies
        parser.set_dangerous_leniencies(lenient_data_after_close=True)
    return parser


def _address(info: Any) -> tuple[str, int] | None:
    if isinstance(info, tuple | list) and len(info) >= 2:
        return (str(info[0]), int(info[1]))
    return None
