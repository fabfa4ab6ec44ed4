"""Front: the ASGI app. The hot endpoints are plain ASGI; everything else goes to FastAPI.

POST /v1/chat/completions, /v1/responses, /v1/messages (and the same without /v1), Gemini's
/v1beta/models/{model}:generateContent and :streamGenerateContent, and every other /v1/* and
/v1beta/* request (forwarded upstream) are served here directly: FastAPI's routing, middleware and
request objects cost more than the proxy's own work on these paths (measured: about half of the
time of a scripted answer). The admin API, the status page, /healthz and /metrics stay in FastAPI.
Errors raised on the hot paths are answered here, in the same OpenAI (or Anthropic) shape.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from functools import partial

import redis.exceptions
from fastapi import FastAPI
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.apis import APIS, Api
from proxy.errors import (
    LoopDetected,
    NotFound,
    ProxyError,
    StoreUnavailable,
    UpgradeRequired,
    error_response,
)
from proxy.http import completions, forward, websocket
from proxy.http.incoming import Headers, Incoming, receive_request
from proxy.http.prefix import PREFIX, split
from proxy.http.relay import OTHER
from proxy.runtime import Runtime
from proxy.upstream.headers import came_back

log = logging.getLogger("proxy")

Handler = Callable[[Incoming, Runtime], Awaitable[Response]]
STORE_ERRORS = (
    sqlite3.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
Route = tuple[Handler, Api | None]  # the handler, and the API whose shape its errors take
DOUBLED = "/v1/v1/"


class Front:
    def __init__(self, api: FastAPI, runtime: Runtime, apis: Sequence[Api] = APIS) -> None:
        self.api = api
        self.runtime = runtime
        self.state = api.state  # so that app.state.runtime works on the front as on FastAPI
        # from the Api table: each API's paths answered here, by name or by form, and the
        # forwarded paths it claims; everything else under /v1/ is forwarded as "other"
        self.routes: dict[str, Route] = {
            path: (partial(completions.serve, api=a), a) for a in apis for path in a.paths
        }
        self.served = tuple(
            (a.serves, (partial(completions.serve, api=a), a)) for a in apis if a.serves
        )
        self.claimed = tuple(
            (a.claims, (partial(forward.forward, api=a), a)) for a in apis if a.claims
        )
        self.other: Route = (partial(forward.forward, api=None), None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await self.socket(scope, receive, send)
            else:
                await self.api(scope, receive, send)
            return
        path = scope["path"]
        if path.startswith(PREFIX):
            scope, refused = self._unprefixed(scope)
            if refused is not None:
                await answer_error(self.runtime, path, refused)(scope, receive, send)
                return
            path = scope["path"]
        route = self.route(path, scope["method"])
        if route is None and path.startswith(DOUBLED):
            refused, meant = self._doubled(path)
            await answer_error(self.runtime, path, refused, api=meant)(scope, receive, send)
            return
        if route is None:
            await self.api(scope, receive, send)
            return
        handler, api = route
        runtime = self.runtime
        # one coroutine for the hot paths: each level of await costs on every request
        try:
            headers = Headers(scope["headers"])  # ASGI servers give names in lower case
            runtime.guard.api(headers)
            named = scope.get("replay.named")
            runtime.guard.binding(headers, named=named is not None and named.chooses)
            if headers.raw(b"via") is not None and came_back(
                scope["headers"], runtime.upstream.mark
            ):
                raise _loop(runtime)
            incoming = await receive_request(
                scope, receive, runtime.settings.max_body_bytes, headers
            )
            response = await handler(incoming, runtime)
        except ProxyError as error:
            response = answer_error(self.runtime, path, error, api=api)
        except Exception as exc:
            response = answer_error(
                self.runtime, path, unexpected(exc, scope["method"], path), api=api
            )
        await response(scope, receive, send)

    async def socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A WebSocket upgrade: the Responses API's socket (proxy.http.websocket), behind the same
        guard as an HTTP request (a web page may open one too); any other is refused."""
        path, runtime = scope["path"], self.runtime
        refused: ProxyError | None = None
        if path.startswith(PREFIX):
            scope, refused = self._unprefixed(scope)
        route = self.route(scope["path"], "POST") if refused is None else None
        api = route[1] if route is not None else None
        try:
            if refused is not None:
                raise refused
            if route is None or api is None or not api.socket:
                raise NotFound(
                    f"{path}: no WebSocket here; the proxy takes WebSockets on the Responses API's "
                    "path (/v1/responses) only"
                )
            if not runtime.settings.websocket:
                raise UpgradeRequired(
                    "WebSockets are off (--no-websocket): send the request over HTTP, "
                    "POST /v1/responses"
                )
            headers = Headers(scope["headers"])
            runtime.guard.api(headers)
            named = scope.get("replay.named")
            runtime.guard.binding(headers, named=named is not None and named.chooses)
            if headers.raw(b"via") is not None and came_back(
                scope["headers"], runtime.upstream.mark
            ):
                raise _loop(runtime)
        except ProxyError as error:
            await websocket.refuse(
                scope, send, answer_error(runtime, path, error, api=api), runtime
            )
            return
        assert route is not None and api is not None
        await websocket.serve(
            scope,
            receive,
            send,
            runtime=runtime,
            handler=route[0],
            answer_error=partial(_answered, runtime, path, api),
        )

    def route(self, path: str, method: str) -> Route | None:
        """Whose path this is: an API's answered path (POST), a forwarded path (/v1/..., or one an
        API claims), or None (/v1/v1/..., and the admin API and pages, in FastAPI)."""
        if method == "POST":
            route = self.routes.get(path)
            if route is not None:
                return route
            for serves, route in self.served:
                if serves(path):
                    return route
        if path.startswith(DOUBLED):
            return None  # answered by _doubled, not forwarded
        for claims, route in self.claimed:
            if claims(path):
                return route
        return self.other if path.startswith("/v1/") else None

    def _unprefixed(self, scope: Scope) -> tuple[Scope, ProxyError | None]:
        """The scope without its /s/{session}/ prefix, which it keeps as "replay.named"; or why
        the prefix is refused (a bad name, or a path after it that is not an API's)."""
        try:
            named = split(scope["path"], scope.get("raw_path") or scope["path"].encode())
        except ProxyError as error:
            return scope, error
        path = named.path
        if self.route(path, "POST") is None and not path.startswith(DOUBLED):
            return scope, NotFound(
                f"{path}: not an API path; under /s/{{session}}/ the proxy serves the APIs only, "
                "not its own pages (/replay/..., /healthz)"
            )
        return {**scope, "path": path, "raw_path": named.raw_path, "replay.named": named}, None

    def _doubled(self, path: str) -> tuple[NotFound, Api | None]:
        """/v1/v1/...: a base URL that ends in /v1 given to a client that adds /v1 itself (the
        Anthropic SDK, Claude Code). Said plainly, not forwarded as a path no upstream serves; in
        the shape of the API it meant."""
        meant = self.routes.get(path.removeprefix("/v1"), self.other)[1]
        adds = meant.adds_v1 if meant is not None else "this client adds"
        error = NotFound(
            f"{path}: /v1 twice: {adds} /v1 to the base URL themselves; give it the proxy's root "
            "(http://HOST:PORT, no /v1)"
        )
        return error, meant


def _loop(runtime: Runtime) -> LoopDetected:
    return LoopDetected(
        "this request has been through this proxy before (its Via header carries the proxy's own "
        f"mark): the upstream {runtime.upstream.name} leads back to the proxy, directly or through "
        "another proxy; point --upstream at the real model's API"
    )


def _answered(runtime: Runtime, path: str, api: Api, exc: Exception) -> Response:
    """A socket frame's error, as an HTTP request's would be answered."""
    error = exc if isinstance(exc, ProxyError) else unexpected(exc, "POST", path)
    return answer_error(runtime, path, error, api=api)


def unexpected(exc: Exception, method: str, path: str) -> ProxyError:
    """An exception no handler turned into an answer: the store failing, or a bug (logged)."""
    if isinstance(exc, STORE_ERRORS):
        log.error("session store unavailable on %s %s: %s", method, path, exc)
        return StoreUnavailable(f"the session store is unavailable: {type(exc).__name__}: {exc}")
    log.exception("unexpected error on %s %s", method, path, exc_info=exc)
    return ProxyError(f"internal error in the replay proxy: {type(exc).__name__}")


def answer_error(
    runtime: Runtime, path: str, error: ProxyError, *, api: Api | None = None
) -> Response:
    """The one place an error the proxy made becomes an answer (and a count): in the shape of the
    API the path is (its clients parse that form), else OpenAI's."""
    # every answer the proxy makes itself is in its log, with why (a harness often drops the body)
    log.log(
        logging.WARNING if error.status >= 500 else logging.INFO,
        "%s -> %d %s: %s",
        path,
        error.status,
        error.code,
        error.message[:500],
    )
    runtime.metrics.answered(api.name if api else OTHER, "-", "error", error.status)
    return error_response(error, shape=api.error_body if api else None)
