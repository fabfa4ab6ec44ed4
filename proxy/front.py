"""Front: the ASGI app. The hot endpoints are plain ASGI; everything else goes to FastAPI.

POST /v1/chat/completions, /v1/responses, /v1/messages (and the same without /v1) and every other
/v1/* request (forwarded upstream) are served here directly: FastAPI's routing, middleware and
request objects cost more than the proxy's own work on these paths (measured: about half of the
time of a scripted answer). The admin API, the status page, /healthz and /metrics stay in FastAPI.
Errors raised on the hot paths are answered here, in the same OpenAI (or Anthropic) shape.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable

import redis.exceptions
from fastapi import FastAPI
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.errors import ProxyError, StoreUnavailable, error_response
from proxy.incoming import Incoming, receive_request
from proxy.routes import completions, forward
from proxy.runtime import Runtime

log = logging.getLogger("proxy")

Handler = Callable[[Incoming, Runtime], Awaitable[Response]]
STORE_ERRORS = (
    sqlite3.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
ROUTES: dict[str, Handler] = {
    "/v1/chat/completions": completions.chat,
    "/chat/completions": completions.chat,
    "/v1/responses": completions.responses,
    "/responses": completions.responses,
    "/v1/messages": completions.messages,  # Claude Code adds ?beta=true: the query does not matter
    "/messages": completions.messages,
}
APIS = (("/chat/completions", "chat"), ("/responses", "responses"), ("/messages", "anthropic"))


class Front:
    def __init__(self, api: FastAPI, runtime: Runtime) -> None:
        self.api = api
        self.runtime = runtime
        self.state = api.state  # so that app.state.runtime works on the front as on FastAPI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            handler = ROUTES.get(path) if scope["method"] == "POST" else None
            if handler is None and path.startswith("/v1/"):
                handler = forward.forward
            if handler is not None:
                await self._serve(handler, scope, receive, send)
                return
        await self.api(scope, receive, send)

    async def _serve(self, handler: Handler, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        try:
            incoming = await receive_request(scope, receive, self.runtime.settings.max_body_bytes)
            response = await handler(incoming, self.runtime)
        except ProxyError as error:
            response = answer_error(self.runtime, path, error)
        except STORE_ERRORS as exc:
            log.error("session store unavailable on %s %s: %s", scope["method"], path, exc)
            response = answer_error(
                self.runtime,
                path,
                StoreUnavailable(f"the session store is unavailable: {type(exc).__name__}: {exc}"),
            )
        except Exception as exc:
            log.exception("unexpected error on %s %s", scope["method"], path)
            response = answer_error(
                self.runtime,
                path,
                ProxyError(f"internal error in the replay proxy: {type(exc).__name__}"),
            )
        await response(scope, receive, send)


def api_of(path: str) -> str:
    for suffix, name in APIS:
        if path.endswith(suffix):
            return name
    return "other"


def answer_error(runtime: Runtime, path: str, error: ProxyError) -> Response:
    """The one place an error the proxy made becomes an answer (and a count)."""
    if error.status >= 500:
        log.warning("%s -> %d: %s", path, error.status, error.message)
    runtime.metrics.answered(api_of(path), "-", "error", error.status)
    return error_response(error, anthropic=path.endswith("/messages"))
