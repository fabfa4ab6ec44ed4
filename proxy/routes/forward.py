"""Everything under /v1 that is not answered from a script goes upstream as it is."""

from __future__ import annotations

import logging
import time

from fastapi import APIRouter, Request
from starlette.responses import Response

from proxy.routes.body import read_body
from proxy.runtime import Runtime

log = logging.getLogger("proxy.requests")
router = APIRouter()

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD"]


@router.api_route("/v1/{path:path}", methods=METHODS, include_in_schema=False)
async def forward(request: Request, path: str) -> Response:
    runtime: Runtime = request.app.state.runtime
    started = time.perf_counter()
    body = await read_body(request, runtime.settings.max_body_bytes)
    response = await runtime.forward(request, body, [])
    log.info(
        "%s /v1/%s source=upstream status=%d ms=%.1f",
        request.method,
        path,
        response.status_code,
        (time.perf_counter() - started) * 1000,
    )
    return response
