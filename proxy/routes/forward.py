"""Everything under /v1 that is not answered from a script goes upstream as it is.

In strict mode nothing goes upstream: such requests are answered from the recordings' exchanges
of the lane "other" (first unused equal request), or get an error.
"""

from __future__ import annotations

import time

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from proxy.errors import BadRequest, ProxyError
from proxy.logs import request_line
from proxy.names import is_valid_name
from proxy.routes.body import read_body
from proxy.routes.strict import answer_recorded
from proxy.runtime import Runtime, new_exchange

router = APIRouter()

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]
LANE = "other"
NO_SESSION = "unsessioned"


@router.api_route("/v1/{path:path}", methods=METHODS, include_in_schema=False)
async def forward(request: Request, path: str) -> Response:
    runtime: Runtime = request.app.state.runtime
    started = time.perf_counter()
    raw = await read_body(request, runtime.settings.max_body_bytes)
    session = _session(request, runtime)
    body = _parsed(raw)
    exchange = new_exchange(
        request, session=session, lane=LANE, api="other", body=body, stream=False
    )
    tap = runtime.tap(request, exchange, perf_start=started, dump=False)
    if runtime.strict:
        response = await answer_recorded(request, runtime, session, LANE, body, [], tap)
        source = "recorded"
    else:
        exchange.source = source = "upstream"
        try:
            response = await runtime.forward(request, raw, [], tap, api=LANE, started=started)
        except ProxyError as error:
            if tap is not None:
                exchange.source = "error"
                await tap.failed(error.status, error.body())
            raise
    ms = (time.perf_counter() - started) * 1000
    request_line(
        LANE, session, LANE, source, f"{request.method} /v1/{path}", response.status_code, ms
    )
    runtime.metrics.answered(LANE, LANE, source, response.status_code)
    return response


def _session(request: Request, runtime: Runtime) -> str:
    for name in runtime.settings.session_header:
        value = request.headers.get(name)
        if value:
            if not is_valid_name(value):
                raise BadRequest(f"the session header {name} is not a valid session id", param=name)
            return value
    return NO_SESSION


def _parsed(raw: bytes) -> object:
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", errors="replace")
