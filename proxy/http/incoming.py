"""Incoming: one HTTP request as the hot path needs it, read straight from the ASGI scope.

The completion endpoints and forwarding do not go through FastAPI's request machinery: method,
path, query, headers and the body (bounded) are all they read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope

from proxy.apis.request import loads_object
from proxy.errors import BadRequest, ClientClosedRequest, PayloadTooLarge
from proxy.http.prefix import Named
from proxy.sessions.registry import BRANCH_HEADER, branch_point
from proxy.upstream.socket import Link
from proxy.upstream.template import refuse_dot_segments

OFF_LOOP = 256 * 1024  # a body larger than this is parsed in a thread (1-2 ms on the loop at most)
# never put on the upstream's request line as they are: a space or CR LF there splits a request
_UNSAFE = re.compile(rb"[\x00-\x20\x7f]")


class Headers(Mapping[str, str]):
    """The request's headers by (lower-case) name, decoded only when read: a request reads a few
    of the 10-20 its client sends, and decoding every one cost 2.4k instructions a header. A
    repeated header keeps its last value."""

    __slots__ = ("_raw",)

    def __init__(self, raw: Iterable[tuple[bytes, bytes]]) -> None:
        self._raw = dict(raw)

    # names are ASCII tokens: encode() (UTF-8, CPython's fast path) gives their latin-1 bytes
    def __getitem__(self, name: str) -> str:
        value = self._raw.get(name.encode())
        if value is None:
            raise KeyError(name)
        return value.decode("latin-1")

    # Mapping.get without its try/except; one of its overloads, as only that one is used here
    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        value = self._raw.get(name.encode())
        return default if value is None else value.decode("latin-1")

    def raw(self, name: bytes) -> bytes | None:
        """The value as it came, by the name as bytes: no decoding."""
        return self._raw.get(name)

    def __iter__(self) -> Iterator[str]:
        return (name.decode("latin-1") for name in self._raw)

    def __len__(self) -> int:
        return len(self._raw)


@dataclass(slots=True)
class Incoming:
    method: str
    path: str  # percent-decoded, for routing and logs
    raw_path: str  # as the caller sent it (still percent-encoded): what is forwarded
    query: str  # as the caller sent it
    raw_headers: list[tuple[bytes, bytes]]
    headers: Headers
    body: bytes
    named: Named | None = None  # the session (and trajectory) named in the path, /s/{session}/
    # a WebSocket frame's request (proxy.http.websocket): its body already read, and the socket
    parsed: dict[str, Any] | None = None
    transport: str = "http"
    link: Link | None = None  # the client socket's own socket to the upstream, for live turns

    @property
    def session(self) -> str | None:
        """The session the path names; it wins over the session headers."""
        return self.named.session if self.named is not None else None

    @property
    def trajectory(self) -> str | None:
        """The trajectory the path names, else the one x-replay-trajectory names."""
        if self.named is not None and self.named.trajectory is not None:
            return self.named.trajectory
        return self.headers.get("x-replay-trajectory")

    @property
    def branch(self) -> int | None:
        """The K the request branches its session at: the path's /k/{K}/, else x-replay-turns."""
        if self.named is not None and self.named.turns is not None:
            return self.named.turns
        return branch_point(self.headers.get(BRANCH_HEADER))

    def json(self) -> dict[str, Any]:
        """The body as a JSON object; run it in a thread when the body is large (`large`)."""
        if self.parsed is not None:
            return self.parsed
        if not self.body and self.headers.raw(b"upgrade"):
            raise _upgrade(self.headers)
        return loads_object(self.body)

    @property
    def large(self) -> bool:
        """Reading this body would hold the event loop long enough for other clients to notice."""
        return len(self.body) > OFF_LOOP


async def receive_request(scope: Scope, receive: Receive, limit: int, headers: Headers) -> Incoming:
    raw_path = scope.get("raw_path") or scope["path"].encode()
    query = scope["query_string"]
    if _UNSAFE.search(raw_path) or _UNSAFE.search(query):
        raise BadRequest(
            "the request target holds a space or a control character; the proxy forwards the "
            "path and query as they came, so they must be percent-encoded",
            param="path",
        )
    # a "." or ".." segment (or %2e, %2F around one) could climb out of the upstream's base
    # path, into another session's; most paths hold neither a dot nor a percent sign
    if b"." in raw_path or b"%" in raw_path:
        refuse_dot_segments(raw_path.decode("latin-1"))
    raw = scope["headers"]
    declared = headers.raw(b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body has {int(declared)} bytes; the limit is {limit}")
    message = await receive()
    if message["type"] == "http.disconnect":
        raise _gone()
    body = message.get("body", b"")
    if message.get("more_body", False):  # a body in pieces: gathered, within the limit
        chunks = [body]
        size = len(body)
        while message.get("more_body", False):
            message = await receive()
            if message["type"] == "http.disconnect":  # a half body is never taken for a whole
                raise _gone()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
            chunks.append(chunk)
        body = b"".join(chunks)
    if len(body) > limit:
        raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
    return Incoming(
        scope["method"], scope["path"], raw_path.decode("latin-1"), query.decode("latin-1"),
        raw, headers, body, scope.get("replay.named"),
    )  # fmt: skip


def _gone() -> ClientClosedRequest:
    """The server ends a request whose body cannot be framed (a bad chunk) as a disconnect."""
    return ClientClosedRequest(
        "the client closed the connection, or its body could not be read, before the request "
        "body was complete"
    )


def _upgrade(headers: Headers) -> BadRequest:
    """A request that asks to switch protocols (curl --http2 on an http:// URL) is not read past
    its head by the server, so its body never arrives."""
    return BadRequest(
        f"the request asks to switch to {headers.get('upgrade')!r} (curl --http2 does so on "
        "http:// URLs); the proxy speaks HTTP/1.1 and does not read the body of such a request: "
        "send it without the upgrade (curl --http1.1)",
        param="upgrade",
    )
