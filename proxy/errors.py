"""Errors the proxy raises, and the one place they become answers: in OpenAI's shape, or in the
shape of the API the request came through (its Api row in proxy.apis says how).

    ProxyError                  an error answered by the proxy itself (never an upstream's)
    ├── BadRequest              400  the request is malformed; says what and where (param)
    │   └── TooDeep             400  JSON nested deeper than proxy.nesting allows
    ├── Unauthorized            401  admin token missing or wrong
    ├── Forbidden               403  admin API off: not on loopback and no token
    │   └── CrossSiteRefused    403  a foreign web page, or an admin call for a name not local
    ├── NotFound                404  unknown session, trajectory or route
    │   └── NotRecorded         404  a session export asked of a proxy that records no such run
    ├── ReplayDiverged          404  the request history disagrees with the session's script
    ├── TrajectoryUnusable      404  a trajectory named by a request cannot be loaded (why)
    ├── PayloadTooLarge         413  body over the configured limit
    ├── UnsupportedMediaType    415  a body that is not JSON on a completion or forwarded path
    ├── LoopDetected            508  the request came back: the upstream points at the proxy
    ├── ClientClosedRequest     499  the client left (or its body broke off) before the body ended
    ├── StoreUnavailable        503  the session store (SQLite, Redis) cannot be reached
    ├── InjectedFault           429, 500, 503 on purpose (--fault): the one error SDKs may retry
    └── UpstreamError
        ├── NoUpstream          503  no --upstream configured, so nothing can be forwarded
        ├── UpstreamUnreachable 502  refused, DNS, TLS certificate, forward proxy, closed unanswered
        ├── UpstreamBadAnswer   502  an answer that cannot be passed on (not HTTP, 101, status 600+)
        └── UpstreamTimeout     504  the upstream did not answer in time

    LoadError                   a trajectory that cannot be loaded: file, message index, reason

Replay errors use 404 on purpose: it is the one status every harness we tested stops on at once
(400 makes mini-swe-agent retry for minutes, 5xx and 429 make every SDK retry). Every response the
proxy makes itself carries `x-should-retry: false`, which the OpenAI and Anthropic SDKs honour,
except a fault injected on purpose, which is there to be retried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.responses import Response


class ProxyError(Exception):
    status = 500
    type = "server_error"
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.extra = extra

    def __reduce__(self) -> tuple[Any, ...]:
        # whole across a process boundary (proxy.offload): Exception's own keeps the message only
        return _rebuilt, (type(self), self.message, self.param, self.extra)

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {
            "message": self.message,
            "type": self.type,
            "param": self.param,
            "code": self.code,
        }
        if self.extra:
            error["replay"] = self.extra
        return {"error": error}


def _rebuilt(
    kind: type[ProxyError], message: str, param: str | None, extra: dict[str, Any]
) -> ProxyError:
    return kind(message, param=param, **extra)


class BadRequest(ProxyError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class TooDeep(BadRequest):
    code = "nested_too_deep"


class UpgradeRequired(ProxyError):
    status = 426  # the answer Codex reads as "use HTTP" when refused a WebSocket
    type = "invalid_request_error"
    code = "websocket_disabled"


class Unauthorized(ProxyError):
    status = 401
    type = "authentication_error"
    code = "invalid_admin_token"


class Forbidden(ProxyError):
    status = 403
    type = "permission_error"
    code = "admin_disabled"


class CrossSiteRefused(Forbidden):
    code = "cross_site_refused"


class NotFound(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class NotRecorded(NotFound):
    """A session's rollout asked for, and no recording holds its run (or none is kept)."""

    code = "session_not_recorded"


class ReplayDiverged(ProxyError):
    status = 404
    type = "invalid_request_error"
    code = "replay_diverged"


# both refusals are 403: they stay until the operator acts (another script, cut or verdict), so
# the harness stops, or goes on without the call


class NotRestored(ProxyError):
    """--require-restored: the session's replay did not restore the recorded environment."""

    status = 403
    type = "invalid_request_error"
    code = "session_not_restored"


class Fenced(ProxyError):
    """--fence: a call before the session's hand-off that the recording does not hold."""

    status = 403
    type = "invalid_request_error"
    code = "fenced_before_handoff"


class TrajectoryUnusable(NotFound):
    code = "trajectory_unusable"


class PayloadTooLarge(ProxyError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class UnsupportedMediaType(ProxyError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"


class LoopDetected(ProxyError):
    status = 508
    type = "server_error"
    code = "forwarding_loop"


class ClientClosedRequest(ProxyError):
    """Nobody reads this answer; the status (nginx's 499) is for the log and the metrics."""

    status = 499
    type = "invalid_request_error"
    code = "client_closed_request"


class StoreUnavailable(ProxyError):
    status = 503
    type = "server_error"
    code = "store_unavailable"


class UpstreamError(ProxyError):
    status = 502
    type = "upstream_error"


class NoUpstream(UpstreamError):
    status = 503
    code = "no_upstream"


class UpstreamUnreachable(UpstreamError):
    status = 502
    code = "upstream_unreachable"


class UpstreamBadAnswer(UpstreamError):
    status = 502
    code = "upstream_bad_answer"


class UpstreamSocketRefused(UpstreamError):
    status = 502
    code = "upstream_websocket_refused"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class InjectedFault(ProxyError):
    """An error injected at a scripted turn (proxy.replay.faults): shaped as the real API's, and
    retryable."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.status = status
        self.type, self.code = _INJECTED_TYPES.get(status, ("server_error", "server_error"))


class LoadError(ValueError):
    """A trajectory that cannot be loaded. `index` is the message (or line) index in the file."""

    def __init__(self, filename: str, index: int | None, reason: str) -> None:
        self.filename = filename
        self.index = index
        self.reason = reason
        where = filename if index is None else f"{filename}:{index}"
        super().__init__(f"{where}: {reason}")


PROXY_HEADERS = {"x-should-retry": "false"}
_INJECTED_TYPES = {
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("server_error", "overloaded"),
}


def error_response(
    error: ProxyError,
    *,
    shape: Callable[[dict[str, Any], int], dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """The error as an answer: OpenAI's shape ({"error": {"message", "type", "param", "code"}}),
    or the API's own, which `shape` (its Api row's error_body) makes from it. `headers` replace
    the x-should-retry: false every other error carries."""
    body = error.body()
    if shape is not None:
        body = shape(body, error.status)
    return Response(
        orjson.dumps(body),
        status_code=error.status,
        media_type="application/json",
        headers=PROXY_HEADERS if headers is None else headers,
    )
