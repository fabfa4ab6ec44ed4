"""A minimal pass-through ASGI app over one HTTP client library, for the client A/B
(bench.clients): only what forwarding needs (the body read, the headers filtered, the answer
streamed back), so the figures compare the libraries, not the proxy's logic.

    UPSTREAM=http://127.0.0.1:9100 CLIENT=aiohttp python -m bench.forwarder

CLIENT: `aiohttp` (a ClientSession), `httpx-aiohttp` (httpx.AsyncClient over httpx-aiohttp's
AiohttpTransport, what the openai SDK offers for speed), `httpx` (httpx.AsyncClient, its own
transport).
"""

from __future__ import annotations

import os
import socket
from typing import Any

import uvicorn

DROP = {b"host", b"content-length", b"connection", b"transfer-encoding", b"keep-alive"}
Scope = dict[str, Any]


class Forwarder:
    def __init__(self, upstream: str, client: str) -> None:
        self.upstream = upstream
        self.kind = client
        self.client: Any = None

    def open(self) -> None:
        if self.kind == "aiohttp":
            import aiohttp

            self.client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
            return
        import httpx

        limits = httpx.Limits(max_connections=None, max_keepalive_connections=1000)
        timeout = httpx.Timeout(600, connect=10)
        if self.kind == "httpx-aiohttp":
            from httpx_aiohttp import HttpxAiohttpClient

            limits = httpx.Limits(max_connections=0, max_keepalive_connections=1000)
            self.client = HttpxAiohttpClient(limits=limits, timeout=timeout)
        elif self.kind == "httpx":
            self.client = httpx.AsyncClient(limits=limits, timeout=timeout)
        else:
            raise SystemExit(f"unknown CLIENT {self.kind!r}")

    async def close(self) -> None:
        await (self.client.close() if self.kind == "aiohttp" else self.client.aclose())

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    self.open()
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await self.close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        message = await receive()
        pieces = [message.get("body", b"")]
        while message.get("more_body", False):  # a long request comes in pieces
            message = await receive()
            pieces.append(message.get("body", b""))
        body = b"".join(pieces)
        url = self.upstream + scope["raw_path"].decode()
        headers = [(k, v) for k, v in scope["headers"] if k not in DROP]
        if self.kind == "aiohttp":
            await self._aiohttp(scope, url, headers, body, send)
        else:
            await self._httpx(scope, url, headers, body, send)

    async def _aiohttp(self, scope: Scope, url: str, headers: Any, body: bytes, send: Any) -> None:
        pairs = [(k.decode(), v.decode()) for k, v in headers]
        async with self.client.request(
            scope["method"], url, headers=pairs, data=body, allow_redirects=False
        ) as answer:
            out = [(k, v) for k, v in answer.raw_headers if k.lower() not in DROP]
            await send({"type": "http.response.start", "status": answer.status, "headers": out})
            async for chunk in answer.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})

    async def _httpx(self, scope: Scope, url: str, headers: Any, body: bytes, send: Any) -> None:
        request = self.client.build_request(scope["method"], url, headers=headers, content=body)
        answer = await self.client.send(request, stream=True)
        try:
            out = [(k, v) for k, v in answer.headers.raw if k.lower() not in DROP]
            await send(
                {"type": "http.response.start", "status": answer.status_code, "headers": out}
            )
            async for chunk in answer.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await answer.aclose()


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    client = os.environ["CLIENT"]
    print(
        f"{client} forwarder listening on http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True
    )
    app = Forwarder(os.environ["UPSTREAM"], client)
    config = uvicorn.Config(app, log_level="warning", access_log=False, server_header=False)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
