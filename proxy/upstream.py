"""Forwarding to the real LLM: one pooled client, streaming pass-through, header filtering.

The response streams back as it arrives (no buffering), with status and headers kept and
hop-by-hop headers dropped. A client that disconnects closes its upstream request at once.
Failures before the response starts become OpenAI-shaped errors naming the upstream.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx
import orjson
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.errors import NoUpstream, UpstreamTimeout, UpstreamUnreachable

log = logging.getLogger("proxy.upstream")

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length"}
_CREDENTIALS = frozenset({"authorization", "x-api-key", "api-key"})


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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/") if base_url else None
        self.name = display_url(self.base_url) if self.base_url else "(none)"
        self._api_key = api_key
        timeout = httpx.Timeout(connect=connect_timeout, read=read_timeout, write=60.0, pool=30.0)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
        self._client = httpx.AsyncClient(
            timeout=timeout, limits=limits, transport=transport, follow_redirects=False
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    def url_for(self, path: str, query: str) -> str:
        """/v1/chat/completions -> {base}/chat/completions: the base URL already ends in /v1."""
        if self.base_url is None:
            raise NoUpstream(
                "this proxy has no upstream configured (--upstream), so a request that is not "
                "answered from a script cannot be served"
            )
        rest = path[3:] if path == "/v1" or path.startswith("/v1/") else path
        url = self.base_url + rest
        return f"{url}?{query}" if query else url

    def request_headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        drop = set(_NOT_FORWARDED)
        for raw, value in headers:
            if raw.lower() == b"connection":  # headers named in Connection are hop-by-hop too
                drop.update(v.strip().lower() for v in value.decode("latin-1").split(","))
        out: list[tuple[bytes, bytes]] = []
        used: set[str] = set()
        for raw_name, value in headers:
            name = raw_name.decode("latin-1").lower()
            if name in drop or name.startswith("x-replay-"):
                continue
            if self._api_key is not None and name in _CREDENTIALS:
                used.add(name)
                continue
            out.append((raw_name, value))
        if self._api_key is not None:
            if "x-api-key" in used:  # an Anthropic client: keep its way of sending the key
                out.append((b"x-api-key", self._api_key.encode()))
            if "x-api-key" not in used or "authorization" in used:
                out.append((b"authorization", f"Bearer {self._api_key}".encode()))
        return out

    async def send(
        self,
        method: str,
        path: str,
        query: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> PassThrough:
        url = self.url_for(path, query)
        request = self._client.build_request(
            method, url, headers=self.request_headers(headers), content=body
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(
                f"the upstream {self.name} did not answer in time ({type(exc).__name__})"
            ) from None
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(
                f"the upstream {self.name} cannot be reached: {_reason(exc)}"
            ) from None
        return PassThrough(response)


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    return text.split("\n")[0]


class PassThrough(Response):
    """An ASGI response that streams an upstream response through and always closes it."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status_code = response.status_code
        self.background = None
        self.raw_headers = [
            (name, value)
            for name, value in response.headers.raw
            if name.decode("latin-1").lower() not in HOP_BY_HOP
        ]
        self.raw_headers.append((b"x-replay-source", b"upstream"))
        self._is_sse = response.headers.get("content-type", "").startswith("text/event-stream")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._close_on_disconnect, receive, group.cancel_scope)
                await send(
                    {
                        "type": "http.response.start",
                        "status": self.status_code,
                        "headers": self.raw_headers,
                    }
                )
                try:
                    async for chunk in self.response.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx.HTTPError as exc:
                    reason = f"the upstream stream broke off: {_reason(exc)}"
                    log.warning(reason)
                    if not self._is_sse:
                        raise  # the client sees a cut response, never a short one that looks whole
                    event = {
                        "error": {
                            "message": reason,
                            "type": "upstream_error",
                            "code": "upstream_stream_broken",
                        }
                    }
                    await send(
                        {
                            "type": "http.response.body",
                            "body": b"data: " + orjson.dumps(event) + b"\n\n",
                            "more_body": True,
                        }
                    )
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()
        finally:
            await self.response.aclose()

    @staticmethod
    async def _close_on_disconnect(receive: Receive, scope: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                scope.cancel()
                return
