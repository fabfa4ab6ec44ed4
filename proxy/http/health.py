"""GET /healthz, GET /metrics, and HEAD / (Claude Code probes it before its first call)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from proxy.runtime import Runtime

router = APIRouter()


@router.get("/healthz")
async def healthz(request: Request) -> dict[str, object]:
    runtime: Runtime = request.app.state.runtime
    return {
        "status": "ok",
        "trajectories": len(runtime.library),
        "upstream": runtime.upstream.name if runtime.upstream.base_url else None,
        # what an operator (and the soak test) watches for leaks
        "upstream_connections": runtime.upstream.connections(),
        "tasks": len(asyncio.all_tasks()),
        "trajectory_cache": runtime.library.cache.report(),
    }


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    body = await runtime.metrics.exposition(runtime.store)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@router.head("/", include_in_schema=False)
async def probe() -> Response:
    return Response(status_code=200)
