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
from collections.abc import Awaitable, Callable
from functools import partial

import redis.exceptions
from fastapi import FastAPI
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.apis import ANTHROPIC, CHAT, GEMINI, RESPONSES
from proxy.apis.gemini import is_gemini_path
from proxy.errors import LoopDetected, NotFound, ProxyError, StoreUnavailable, error_response
from proxy.http import completions, forward
from proxy.http.incoming import Headers, Incoming, receive_request
from proxy.http.prefix import PREFIX, split
from proxy.runtime import Runtime
from proxy.upstream.headers import came_back

log = logging.getLogger("proxy")

Handler = Callable[[Incoming, Runtime], Awaitable[Response]]
STORE_ERRORS = (
    sqlite3.OperationalError,
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
)
OTHER = "other"  # the api label of everything that is not one of the four completion APIs
# path -> (handler, api label); the label also picks the error shape, never the path's suffix
_CHAT = partial(completions.serve, api=CHAT)
_RESPONSES = partial(completions.serve, api=RESPONSES)
_MESSAGES = partial(completions.serve, api=ANTHROPIC)
_GEMINI = partial(completions.serve, api=GEMINI)
# forwarded upstream as they come: the OpenAI and Anthropic /v1 APIs, and Gemini's versions
FORWARDED = ("/v1/", "/v1beta/", "/v1alpha/")
DOUBLED = "/v1/v1/"
ROUTES: dict[str, tuple[Handler, str]] = {
    "/v1/chat/completions": (_CHAT, CHAT.name),
    "/chat/completions": (_CHAT, CHAT.name),
    "/v1/responses": (_RESPONSES, RESPONSES.name),
    "/responses": (_RESPONSES, RESPONSES.name),
    # Claude Code adds ?beta=true: the query does not matter
    "/v1/messages": (_MESSAGES, ANTHROPIC.name),
    "/messages": (_MESSAGES, ANTHROPIC.name),
}


class Front:
    def __init__(self, api: FastAPI, runtime: Runtime) -> None:
        self.api = api
        self.runtime = runtime
        self.state = api.state  # so that app.state.runtime works on the front as on FastAPI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.api(scope, receive, send)
            return
        path = scope["path"]
        if path.startswith(PREFIX):
            scope, refused = _unprefixed(scope)
            if refused is not None:
                await answer_error(self.runtime, path, refused)(scope, receive, send)
                return
            path = scope["path"]
        route = ROUTES.get(path) if scope["method"] == "POST" else None
        if route is None and scope["method"] == "POST" and is_gemini_path(path):
            route = (_GEMINI, GEMINI.name)  # /v1beta/models/{model}:generateContent and stream
        if route is None and path.startswith(DOUBLED):
            refused, shape = _doubled(path)
            await answer_error(self.runtime, path, refused, api=shape)(scope, receive, send)
            return
        if route is None:
            if not path.startswith(FORWARDED):
                await self.api(scope, receive, send)
                return
            route = (forward.forward, OTHER if path.startswith("/v1/") else GEMINI.name)
        handler, api = route
        runtime = self.runtime
        # one coroutine for the hot paths: each level of await costs on every request
        try:
            headers = Headers(scope["headers"])  # ASGI servers give names in lower case
            runtime.guard.api(headers)
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


def _unprefixed(scope: Scope) -> tuple[Scope, ProxyError | None]:
    """The scope without its /s/{session}/ prefix, which it keeps as "replay.named"; or why the
    prefix is refused (a bad name, or a path after it that is not an API's)."""
    try:
        named = split(scope["path"], scope.get("raw_path") or scope["path"].encode())
    except ProxyError as error:
        return scope, error
    path = named.path
    if not path.startswith(FORWARDED) and path not in ROUTES:
        return scope, NotFound(
            f"{path}: not an API path; under /s/{{session}}/ the proxy serves the APIs only, "
            "not its own pages (/replay/..., /healthz)"
        )
    return {**scope, "path": path, "raw_path": named.raw_path, "replay.named": named}, None


def _doubled(path: str) -> tuple[NotFound, str]:
    """/v1/v1/...: a base URL that ends in /v1 given to a client that adds /v1 itself (the
    Anthropic SDK, Claude Code). Said plainly, not forwarded as a path no upstream serves; in the
    shape of the API it meant."""
    meant = path.removeprefix("/v1")
    api = ROUTES[meant][1] if meant in ROUTES else OTHER
    adds = "the Anthropic SDK and Claude Code add" if api == ANTHROPIC.name else "this client adds"
    error = NotFound(
        f"{path}: /v1 twice: {adds} /v1 to the base URL themselves; give it the proxy's root "
        "(http://HOST:PORT, no /v1)"
    )
    return error, api


def _loop(runtime: Runtime) -> LoopDetected:
    return LoopDetected(
        "this request has been through this proxy before (its Via header carries the proxy's own "
        f"mark): the upstream {runtime.upstream.name} leads back to the proxy, directly or through "
        "another proxy; point --upstream at the real model's API"
    )


def unexpected(exc: Exception, method: str, path: str) -> ProxyError:
    """An exception no handler turned into an answer: the store failing, or a bug (logged)."""
    if isinstance(exc, STORE_ERRORS):
        log.error("session store unavailable on %s %s: %s", method, path, exc)
        return StoreUnavailable(f"the session store is unavailable: {type(exc).__name__}: {exc}")
    log.exception("unexpected error on %s %s", method, path, exc_info=exc)
    return ProxyError(f"internal error in the replay proxy: {type(exc).__name__}")


def answer_error(runtime: Runtime, path: str, error: ProxyError, *, api: str = OTHER) -> Response:
    """The one place an error the proxy made becomes an answer (and a count); Anthropic-shaped
    on the Messages API, whose clients parse that form."""
    # every answer the proxy makes itself is in its log, with why (a harness often drops the body)
    log.log(
        logging.WARNING if error.status >= 500 else logging.INFO,
        "%s -> %d %s: %s",
        path,
        error.status,
        error.code,
        error.message[:500],
    )
    runtime.metrics.answered(api, "-", "error", error.status)
    return error_response(error, api=api)
