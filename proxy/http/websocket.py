"""The Responses API over a WebSocket: one socket, many turns, each frame taken the way an HTTP
request is.

A `response.create` frame becomes the request POST /v1/responses would have been (its items
joined to the socket's last response when it continues one: proxy.apis.responses_socket), with
the headers of the socket's upgrade request, and goes through the same handler as an HTTP
request: session, lane, turn, faults, recording, the request log and the metrics see a turn like
any other. Its answer, an SSE stream, goes back as one text frame per event, as it arrives; an
error answer as one error frame. A live turn goes upstream over the socket's own socket to the
upstream (proxy.upstream.socket), or over HTTP with the whole conversation (--upstream-websocket:
the choice is made in proxy.http.relay).

Bounds: a frame is at most --max-body-bytes (uvicorn's ws_max_size); a socket idle for
--websocket-idle-timeout is closed; after --websocket-max-turns frames the socket says
`websocket_connection_limit_reached` (what the API says after 60 minutes), and a client opens
another. One frame is answered at a time; frames sent meanwhile wait their turn.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from httpx_sse._decoders import SSEDecoder, SSELineDecoder  # pinned <0.5: no public decoder
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from proxy.apis.responses_socket import (
    TERMINAL,
    Chain,
    Frame,
    completed_output,
    error_frame,
    read_frame,
    warm_up,
)
from proxy.errors import BadRequest, ProxyError
from proxy.http.incoming import OFF_LOOP, Headers, Incoming
from proxy.runtime import Runtime
from proxy.upstream.socket import Link

log = logging.getLogger("proxy.websocket")

Handler = Callable[[Incoming, Runtime], Awaitable[Response]]
# an error as the HTTP answer the front would give (any exception: the front says what it was)
Refuse = Callable[[Exception], Response]
# the upgrade's own headers: about this socket, not the requests its frames make
_SOCKET_HEADERS = frozenset(
    {b"upgrade", b"connection", b"content-length", b"content-type", b"transfer-encoding"}
)
_JSON = (b"content-type", b"application/json")
LIMIT_REACHED = "websocket_connection_limit_reached"


async def refuse(scope: Scope, send: Send, response: Response, runtime: Runtime) -> None:
    """An upgrade refused with an HTTP answer (426 with --no-websocket, which Codex reads as "use
    HTTP"; the guard's 403), where the server can send one; else the socket closed unopened."""
    runtime.metrics.socket("refused")
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    await send(
        {
            "type": "websocket.http.response.start",
            "status": response.status_code,
            "headers": response.raw_headers,
        }
    )
    await send({"type": "websocket.http.response.body", "body": response.body})


async def serve(
    scope: Scope,
    receive: Receive,
    send: Send,
    *,
    runtime: Runtime,
    handler: Handler,
    answer_error: Refuse,
) -> None:
    """The socket from its upgrade to its close."""
    settings = runtime.settings
    await send({"type": "websocket.accept"})
    runtime.metrics.socket("opened")
    socket = _Socket(receive, send)
    reader = asyncio.create_task(socket.read())
    chain = Chain()
    link = Link(runtime.upstream)  # its live turns' socket upstream, opened at the first one
    headers = [
        (k, v) for k, v in scope["headers"] if k not in _SOCKET_HEADERS and b"websocket" not in k
    ]
    headers.append(_JSON)
    turns = 0
    why = "the client closed it"
    try:
        while True:
            try:
                message = await asyncio.wait_for(
                    socket.frames.get(), settings.websocket_idle_timeout
                )
            except TimeoutError:
                why = f"idle for {settings.websocket_idle_timeout:g} s"
                await socket.close(1000, "idle")
                break
            if message is None:
                break
            raw = message.get("text")
            try:
                if raw is None:
                    raise _binary()
                # a frame, or the conversation it continues, large enough to be felt by every
                # other client is read and written in a thread, as an HTTP body is
                large = len(raw) + chain.size > OFF_LOOP
                read = await asyncio.to_thread(_read, raw, chain) if large else _read(raw, chain)
            except ProxyError as error:
                await _relay(answer_error(error), scope, socket)
                continue
            if read is None:  # a receipt
                continue
            frame, body = read
            turns += 1
            if turns > settings.websocket_max_turns:
                await socket.text(_limit_reached(settings.websocket_max_turns))
                why = f"{settings.websocket_max_turns} turns"
                await socket.close(1000, "turn limit")
                break
            if not frame.generate:
                key = secrets.token_hex(6)
                rid, frames = warm_up(frame.body, key, int(time.time()))
                for text in frames:
                    await socket.text(text)
                chain.remember(rid, frame.body, [], len(body))
                runtime.metrics.socket("warmup")
                continue
            incoming = Incoming(
                "POST",
                scope["path"],
                (scope.get("raw_path") or scope["path"].encode()).decode("latin-1"),
                scope.get("query_string", b"").decode("latin-1"),
                headers,
                Headers(headers),
                body,
                scope.get("replay.named"),
                parsed=frame.body,
                transport="websocket",
                link=link,
            )
            try:
                response = await handler(incoming, runtime)
            except Exception as exc:  # a ProxyError, or the store failing, or a bug (logged)
                response = answer_error(exc)
            relayed = await _relay(response, scope, socket)
            if socket.gone.is_set():
                break
            if relayed.broke_off:
                why = "the answer broke off before response.completed"
                await socket.close(1011, "the answer broke off")
                break
            if relayed.completed is not None:
                rid, output = relayed.completed
                chain.remember(rid, frame.body, output, len(body))
    finally:
        reader.cancel()
        await link.aclose()
        runtime.metrics.socket("closed")
        log.info("websocket %s closed after %d frames: %s", scope["path"], turns, why)


async def _relay(response: Response, scope: Scope, socket: _Socket) -> _Relayed:
    """An HTTP answer to a frame (a turn, a forwarded answer, an error), sent on as frames."""
    relayed = _Relayed(socket)
    await response(_http_scope(scope), socket.until_gone, relayed.send)
    if not socket.gone.is_set():
        await relayed.finish()
    return relayed


def _read(raw: str, chain: Chain) -> tuple[Frame, bytes] | None:
    """A frame as a request: its body, and that body as the bytes an HTTP request would carry
    (forwarded and recorded as they are); None for a receipt."""
    frame = read_frame(raw, chain)
    return None if frame is None else (frame, orjson.dumps(frame.body))


class _Socket:
    """The ASGI socket: frames read as they come (a frame sent during an answer waits in
    `frames`), and whether the client has gone."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self.receive = receive
        self.send = send
        # a few frames may wait while one is answered; then the client waits (TCP backpressure)
        self.frames: asyncio.Queue[Message | None] = asyncio.Queue(maxsize=8)
        self.gone = asyncio.Event()
        self.closed = False

    async def read(self) -> None:
        while True:
            message = await self.receive()
            if message["type"] == "websocket.disconnect":
                self.gone.set()
                await self.frames.put(None)
                return
            if message["type"] == "websocket.receive":
                await self.frames.put(message)

    async def until_gone(self) -> Message:
        """`receive` for the answer's ASGI call: the body is read, so all that can come is the
        client leaving."""
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def text(self, data: bytes) -> None:
        if self.gone.is_set() or self.closed:
            return
        try:
            await self.send({"type": "websocket.send", "text": data.decode()})
        except OSError:  # the server's ClientDisconnected: the client left mid-answer
            self.gone.set()

    async def close(self, code: int, reason: str) -> None:
        if not self.gone.is_set() and not self.closed:
            self.closed = True
            try:
                await self.send({"type": "websocket.close", "code": code, "reason": reason})
            except OSError:
                self.gone.set()


class _Relayed:
    """An HTTP answer to a frame, sent on as frames: an SSE stream one event per frame as it
    arrives; any other answer (an error, in the API's JSON shape) as one error frame."""

    def __init__(self, socket: _Socket) -> None:
        self.socket = socket
        self.status = 0
        self.stream = False
        self.body: list[bytes] = []
        self.text = codecs.getincrementaldecoder("utf-8")()
        self.lines = SSELineDecoder()
        self.events = SSEDecoder()
        self.ended = False  # a terminal event was sent
        self.completed: tuple[str, list[Any]] | None = None

    @property
    def broke_off(self) -> bool:
        return self.stream and self.status == 200 and not self.ended

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            kind = dict(message.get("headers") or []).get(b"content-type", b"")
            self.stream = kind.startswith(b"text/event-stream")
            return
        if message["type"] != "http.response.body":
            return
        chunk = message.get("body", b"")
        if not self.stream or self.status != 200:
            self.body.append(chunk)
            return
        await self._lines(self.lines.decode(self.text.decode(chunk)))

    async def _lines(self, lines: list[str]) -> None:
        for line in lines:
            event = self.events.decode(line)
            if event is None or not event.data or event.data == "[DONE]":
                continue
            kind = event.event if event.event != "message" else _kind(event.data)
            if kind == "response.completed":
                self.completed = completed_output(event.data)
            if kind in TERMINAL:
                self.ended = True
            await self.socket.text(event.data.encode())

    async def finish(self) -> None:
        """What the answer left: an SSE stream's last event, the whole of an error, or a whole
        response (an upstream that answered a streamed request in one JSON body)."""
        if self.stream and self.status == 200:
            await self._lines([*self.lines.decode(self.text.decode(b"", final=True)), "", ""])
            return
        raw = b"".join(self.body)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = {"message": raw.decode("utf-8", "replace")[:2000]}
        self.ended = True
        if self.status == 200 and isinstance(body, dict) and body.get("object") == "response":
            data = orjson.dumps(
                {"type": "response.completed", "sequence_number": 0, "response": body}
            )
            self.completed = completed_output(data)
            await self.socket.text(data)
            return
        await self.socket.text(error_frame(self.status, body))


def _kind(data: str) -> str | None:
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return event.get("type") if isinstance(event, dict) else None


def _http_scope(scope: Scope) -> Scope:
    return {**scope, "type": "http", "method": "POST", "http_version": "1.1"}


def _binary() -> BadRequest:
    return BadRequest("a binary frame: the Responses API's frames are JSON text", param="frame")


def _limit_reached(turns: int) -> bytes:
    return orjson.dumps(
        {
            "type": "error",
            "status": 400,
            "error": {
                "type": "invalid_request_error",
                "code": LIMIT_REACHED,
                "message": f"this socket has answered its {turns} turns (--websocket-max-turns): "
                "open a new WebSocket connection to continue",
            },
        }
    )
