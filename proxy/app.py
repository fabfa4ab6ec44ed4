"""create_app: Settings (and optional test seams) -> the FastAPI app, with its error handlers."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from proxy import __version__, log_format
from proxy.apis import APIS, Api, fields_of
from proxy.config import Settings
from proxy.errors import BadRequest, NotFound, ProxyError
from proxy.guard import Guard
from proxy.http import admin, health, ui
from proxy.http.front import Front, answer_error, unexpected
from proxy.metrics import Metrics
from proxy.offload import Offload
from proxy.recording.dumper import Dumper
from proxy.recording.recorder import Recorder
from proxy.recording.tracer import Tracer
from proxy.replay.engine import Mode
from proxy.runtime import Runtime
from proxy.sessions.expiry import keys_live, sweep
from proxy.sessions.library import Library
from proxy.sessions.registry import Sessions
from proxy.store import Store, open_store
from proxy.upstream import Upstream


def create_app(
    settings: Settings,
    *,
    store: Store | None = None,
    upstream: Upstream | None = None,
    library: Library | None = None,
    apis: Sequence[Api] = APIS,
) -> Front:
    """Trajectories are loaded here, not in the lifespan, so a bad file fails before binding.
    `apis`: the APIs served (the table in proxy.apis; a test adds one of its own)."""
    runtime = _runtime(settings, store=store, upstream=upstream, library=library, apis=apis)
    api = FastAPI(
        title="replay-proxy",
        version=__version__,
        lifespan=partial(_lifespan, runtime),
        docs_url=None,
        redoc_url=None,
    )
    api.state.runtime = runtime
    api.include_router(health.router)
    api.include_router(ui.router)
    api.include_router(ui.root)
    api.include_router(admin.router)
    _install_error_handlers(api)
    _document_hot_paths(api, apis)
    return Front(api, runtime, apis)


def _runtime(
    settings: Settings,
    *,
    store: Store | None,
    upstream: Upstream | None,
    library: Library | None,
    apis: Sequence[Api],
) -> Runtime:
    """The running proxy's parts, each made from the settings unless given."""
    if library is None:
        library = Library.load(
            settings.trajectory,
            settings.trajectory_dir,
            cache_bytes=settings.trajectory_cache_bytes,
            apis={one.name: one for one in apis},
        )
    if store is None:
        store = open_store(settings.store, ttl=keys_live(settings.session_ttl))
    if upstream is None:
        key = settings.upstream_api_key
        upstream = Upstream(
            settings.upstream,
            api_key=key.get_secret_value() if key else None,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
            total_timeout=settings.total_timeout,
            copy_limit=settings.max_body_bytes,
            instance=instance_id(),
            headers=settings.upstream_header,
        )
    secrets = tuple(
        s.get_secret_value()
        for s in (settings.upstream_api_key, settings.admin_token)
        if s is not None
    )
    return Runtime(
        settings=settings,
        store=store,
        library=library,
        sessions=Sessions(
            store,
            library,
            bind_on_task=settings.bind_on_task,
            replay_turns=settings.replay_turns,
            strict=settings.mode is Mode.STRICT,
            faults=settings.faults(),
            require_restored=settings.require_restored,
        ),
        upstream=upstream,
        rules=settings.rules(fields_of(apis)),
        metrics=Metrics(),
        recorder=Recorder(settings.record_dir, secrets, apis=library.apis)
        if settings.record_dir
        else None,
        dumper=Dumper(settings.dump_dir, store.next_sequence, secrets)
        if settings.dump_dir
        else None,
        tracer=Tracer.from_environment(),
        guard=Guard(
            settings.allowed_host,
            admin_token=settings.admin_token is not None,
            upstream_key=settings.upstream_api_key is not None,
            binding_token=None
            if settings.admin_token is None or settings.open_binding
            else settings.admin_token.get_secret_value(),
        ),
        offload=Offload(settings),
    )


@asynccontextmanager
async def _lifespan(runtime: Runtime, app: FastAPI) -> AsyncIterator[None]:
    """The store checked and its sweeper started; at the end, everything the runtime opened is
    closed."""
    await runtime.store.check()
    sweeper = None
    ttl = runtime.settings.session_ttl
    if ttl > 0:
        sweeper = asyncio.create_task(sweep(runtime.store, ttl, runtime.metrics))
    try:
        yield
    finally:
        if sweeper is not None:
            sweeper.cancel()
        if runtime.offload is not None:
            runtime.offload.close()
        await runtime.upstream.aclose()
        await runtime.store.close()
        for writer in (runtime.recorder, runtime.dumper):
            if writer is not None:
                writer.close()
        if runtime.tracer is not None:  # its last spans, in a bounded wait
            await asyncio.to_thread(runtime.tracer.shutdown)


def _document_hot_paths(api: FastAPI, apis: Sequence[Api]) -> None:
    """proxy.http.front serves the completion endpoints outside FastAPI; list them in the schema
    too, from the Api table, each with its errors' shape."""
    plain = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            schema = plain()
            body = {
                "required": True,
                "content": {"application/json": {"schema": {"type": "object"}}},
            }
            for one in apis:
                shaped = f"{one.error_shape}-shaped"
                answers = {
                    "200": {
                        "description": "the answer: JSON, or an SSE stream when the request asks "
                        "for one"
                    },
                    "400": {"description": f"a malformed request, {shaped}"},
                    "404": {
                        "description": "a replay error (divergence, unknown trajectory), " + shaped
                    },
                }
                summary = f"{one.title}: a scripted turn, or forwarded upstream"
                for path in one.documented:
                    post: dict[str, Any] = {
                        "summary": summary,
                        "requestBody": body,
                        "responses": answers,
                    }
                    named = re.findall(r"\{(\w+)\}", path)  # Gemini's {model}
                    if named:
                        post["parameters"] = [
                            {
                                "name": n,
                                "in": "path",
                                "required": True,
                                "schema": {"type": "string"},
                            }
                            for n in named
                        ]
                    schema["paths"][path] = {"post": post}
            api.openapi_schema = schema
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]


def _install_error_handlers(app: FastAPI) -> None:
    async def proxy_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ProxyError)
        return answer_error(request.app.state.runtime, request.url.path, exc)

    async def validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        error = BadRequest(f"{where}: {first.get('msg', 'invalid request')}", param=where)
        return answer_error(request.app.state.runtime, request.url.path, error)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            error: ProxyError = NotFound(f"no route {request.method} {request.url.path}")
        else:
            error = ProxyError(str(exc.detail))
            error.status = exc.status_code
            error.type = "invalid_request_error"
        return answer_error(request.app.state.runtime, request.url.path, error)

    async def unexpected_error(request: Request, exc: Exception) -> Response:
        error = unexpected(exc, request.method, request.url.path)
        return answer_error(request.app.state.runtime, request.url.path, error)

    app.add_exception_handler(ProxyError, proxy_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, unexpected_error)


WORKER_SETTINGS = "_REPLAY_PROXY_WORKER_SETTINGS"
INSTANCE = "_REPLAY_PROXY_INSTANCE"  # one id for all the workers of one `serve`


def instance_id() -> str:
    """This proxy's own mark on what it forwards (proxy.upstream.headers.via): the workers of one
    `serve` share the one their parent set, so a request that comes back to any of them is
    known; any other app gets one of its own."""
    return os.environ.get(INSTANCE) or secrets.token_hex(8)


def factory() -> Front:
    """The app of one worker process (--workers N): settings come from the parent process."""
    data = os.environ.get(WORKER_SETTINGS)
    settings = Settings(**json.loads(data)) if data else Settings()
    configure_logging(settings)
    app = create_app(settings)
    settle()
    return app


def settle() -> None:
    """Before serving: what startup made (modules, the app, the loaded trajectories) is kept out
    of the cyclic garbage collector's sight. A full collection otherwise walks all of it, a pause
    that measured 50-90 ms with a thousand streams open (their p99 gap went from +10 to +52 ms);
    those objects live as long as the process anyway."""
    gc.collect()
    gc.freeze()


def configure_logging(settings: Settings) -> None:
    log_format.configure(settings.log_level.value, settings.log_format.value)
