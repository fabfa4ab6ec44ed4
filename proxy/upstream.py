"""Forwarding to the real LLM: one pooled client (proxy.client), streaming pass-through, header
filtering.

The response streams back as it arrives (no buffering), with status and headers kept and
hop-by-hop headers dropped. A client that disconnects closes its upstream request at once.
Failures before the response starts become OpenAI-shaped errors naming the upstream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.client import Answer, ClientError, Pool, TimedOut
from proxy.errors import NoUpstream, UpstreamTimeout, UpstreamUnreachable
from proxy.relay import Relay

log = logging.getLogger("proxy.upstream")

# header names as bytes, lower-case: compared without decoding on every request
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
_NOT_FORWARDED = HOP_BY_HOP | {b"host", b"content-length"}
_NOT_FORWARDED_IDENTITY = _NOT_FORWARDED | {b"accept-encoding"}
_CREDENTIALS = frozenset({b"authorization", b"x-api-key", b"api-key"})
# the answer's Date is the proxy's (uvicorn adds it): the upstream's would make a second one
_NOT_RETURNED = HOP_BY_HOP | {b"date"}


def display_url(url: str) -> str:
    """The URL without user:password, for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


class Upstream:
    def __init__(
        self,
        base_url: str | None,
        *,
        api_key: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 600.0,
        total_timeout: float | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/") if base_url else None
        self.name = display_url(self.base_url) if self.base_url else "(none)"
        self._api_key = api_key
        self._secret = api_key.encode() if api_key else None
        self._prefix = urlsplit(self.base_url).path if self.base_url else ""
        self._pool = (
            Pool(
                self.base_url,
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                total_timeout=total_timeout,
            )
            if self.base_url
            else None
        )

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()

    def connections(self) -> dict[str, int]:
        """Connections to the upstream: open in all, and idle in the pool among them."""
        if self._pool is None:
            return {"open": 0, "idle": 0}
        return {"open": self._pool.open, "idle": len(self._pool.idle)}

    def target(self, path: str, query: str) -> str:
        """/v1/chat/completions -> {base path}/chat/completions: the base URL already ends in /v1."""
        if self._pool is None:
            raise NoUpstream(
                "this proxy has no upstream configured (--upstream), so a request that is not "
                "answered from a script cannot be served"
            )
        rest = path[3:] if path == "/v1" or path.startswith("/v1/") else path
        target = self._prefix + rest
        return f"{target}?{query}" if query else target

    def request_headers(
        self, headers: list[tuple[bytes, bytes]], *, identity: bool = False
    ) -> list[tuple[bytes, bytes]]:
        """`identity`: ask for an uncompressed answer (the proxy keeps a copy to record)."""
        drop = _NOT_FORWARDED_IDENTITY if identity else _NOT_FORWARDED
        # one pass; ASGI names are lower case; the pairs are kept as they are (no new tuples)
        out = []
        named: set[bytes] = set()  # headers named in Connection are hop-by-hop too
        for h in headers:
            name = h[0]
            if name in drop:
                if name == b"connection":
                    named.update(v.strip().lower() for v in h[1].split(b","))
            elif name[:9] != b"x-replay-":
                out.append(h)
        if named:
            out = [h for h in out if h[0] not in named]
        if identity:
            out.append((b"accept-encoding", b"identity"))
        key = self._api_key
        if key is None:
            return out
        used = {h[0] for h in out if h[0] in _CREDENTIALS}
        if used:
            out = [h for h in out if h[0] not in _CREDENTIALS]
        if b"x-api-key" in used:  # an Anthropic client: keep its way of sending the key
            out.append((b"x-api-key", key.encode()))
        if b"x-api-key" not in used or b"authorization" in used:
            out.append((b"authorization", f"Bearer {key}".encode()))
        return out

    async def send(
        self,
        method: str,
        path: str,
        query: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        *,
        on_complete: OnComplete | None = None,
        keep_body: bool = False,
    ) -> PassThrough:
        target = self.target(path, query)
        assert self._pool is not None
        try:
            answer = await self._pool.request(
                method, target, self.request_headers(headers, identity=keep_body), body
            )
        except TimedOut as exc:
            raise UpstreamTimeout(
                f"the upstream {self.name} did not answer in time: {exc}"
            ) from None
        except ClientError as exc:
            raise UpstreamUnreachable(
                f"the upstream {self.name} cannot be reached: {exc}"
            ) from None
        return PassThrough(
            answer, on_complete=on_complete, keep_body=keep_body, secret=self._secret
        )


@dataclass(slots=True)
class Captured:
    """What went through a PassThrough, for the recorder and the dumper."""

    status: int
    content_type: str
    body: bytearray = field(default_factory=bytearray)
    first_byte: float | None = None  # time.perf_counter() of the first body chunk
    finished: float | None = None  # time.perf_counter() when the upstream was done
    error: str | None = None  # the stream broke off, or the client left
    complete: bool = False


OnComplete = Callable[[Captured], Awaitable[None]]

# The final event of a stream: held back until on_complete is done (a dump must be whole on disk
# before the client can see the end of its answer).
_TERMINAL = (b"data: [DONE]", b"event: response.completed", b"event: message_stop")


class PassThrough(Response):
    """An ASGI response that streams an upstream answer through and always closes it.

    A client that disconnects closes the upstream connection at once (a watcher on `receive`).
    `on_complete` gets the timings (and, with `keep_body`, the bytes) once the upstream is done;
    with `keep_body` it also runs before the end of the answer is released: for a stream, the
    final event is held back; a JSON body is held whole (a dump must be on disk first). The
    upstream key, should the upstream ever echo it, is masked before the client sees it."""

    def __init__(
        self,
        answer: Answer,
        *,
        on_complete: OnComplete | None = None,
        keep_body: bool = False,
        secret: bytes | None = None,
    ) -> None:
        self.answer = answer
        self.status_code = answer.status
        self.background = None
        headers: list[tuple[bytes, bytes]] = []
        content_type = b""
        for name, value in answer.headers:  # as the upstream wrote them: any case
            lower = name.lower()
            if lower not in _NOT_RETURNED:
                headers.append((name, value))
                if lower == b"content-type" and not content_type:
                    content_type = value
        headers.append((b"x-replay-source", b"upstream"))
        self.raw_headers = headers
        self.content_type = content_type.decode("latin-1")
        self.is_sse = self.content_type.startswith("text/event-stream")
        self.on_complete = on_complete
        self.keep_body = keep_body or (secret is not None and self.status_code >= 400)
        self.secret = secret

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = self.answer
        captured = Captured(self.status_code, self.content_type)
        whole = answer.whole()
        if whole is not None:  # it has all arrived: no watcher, one send
            answer.close()
            captured.first_byte = captured.finished = time.perf_counter()
            if self.keep_body:
                captured.body += whole
            if self.on_complete is not None:
                captured.complete = True
                await self.on_complete(captured)
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            await send({"type": "http.response.body", "body": self._masked(whole)})
            return
        reported = False
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            answer.close()  # the upstream connection closes now, mid-answer if need be

        watcher = asyncio.ensure_future(watch())
        relay = None
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            held = b""

            def prepare(chunk: bytes) -> bytes:
                nonlocal held
                if self.keep_body:
                    captured.body += chunk
                    chunk, held = self._hold(chunk, held)
                return self._masked(chunk)

            # most answers need no copy and no masking: nothing to do per piece
            plain = not self.keep_body and self.secret is None
            relay = Relay(answer, send, None if plain else prepare)
            try:
                await relay.finished
            except ClientError as exc:
                if gone:
                    return
                reason = f"the upstream stream broke off: {exc}"
                log.warning(reason)
                captured.error = reason
                if not self.is_sse:
                    raise  # the client sees a cut response, never a short one that looks whole
                error = {
                    "error": {
                        "message": reason,
                        "type": "upstream_error",
                        "code": "upstream_stream_broken",
                    }
                }
                held += b"data: " + orjson.dumps(error) + b"\n\n"
            captured.first_byte = relay.first_byte  # before on_complete reads it
            captured.finished = time.perf_counter()
            if self.on_complete is not None:
                captured.complete = captured.error is None
                reported = True
                await self.on_complete(captured)
            await send(
                {"type": "http.response.body", "body": self._masked(held), "more_body": False}
            )
        finally:
            if relay is not None:
                await relay.close()
                captured.first_byte = relay.first_byte
            watcher.cancel()
            await asyncio.wait((watcher,))  # never left running; an outer cancel still propagates
            answer.close()
            if self.on_complete is not None and not reported:
                captured.error = captured.error or "the client disconnected before the end"
                captured.finished = captured.finished or time.perf_counter()
                await asyncio.shield(self.on_complete(captured))

    def _masked(self, data: bytes) -> bytes:
        secret = self.secret
        if secret is not None and secret in data:
            return data.replace(secret, b"*" * len(secret))  # the same length: content-length holds
        return data

    def _hold(self, chunk: bytes, held: bytes) -> tuple[bytes, bytes]:
        """Split a chunk into what goes out now and what waits for on_complete."""
        if held or not self.is_sse:
            return b"", held + chunk
        for marker in _TERMINAL:
            at = chunk.find(marker)
            if at >= 0:
                return chunk[:at], chunk[at:]
        return chunk, b""
