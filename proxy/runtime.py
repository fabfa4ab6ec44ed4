"""Runtime: what a running proxy holds, made once per app and reached through app.state."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from proxy.config import Settings
from proxy.library import Library
from proxy.sessions import Sessions
from proxy.store import Store
from proxy.upstream import PassThrough, Upstream


@dataclass(slots=True)
class Runtime:
    settings: Settings
    store: Store
    library: Library
    sessions: Sessions
    upstream: Upstream

    async def forward(
        self, request: Request, body: bytes, headers: list[tuple[bytes, bytes]]
    ) -> PassThrough:
        response = await self.upstream.send(
            request.method,
            request.url.path,
            request.url.query,
            request.headers.raw,
            body,
        )
        response.raw_headers.extend(headers)
        return response
