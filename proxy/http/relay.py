"""An exchange on its way: the tap that records or dumps it, and the request sent upstream with
its answer passed back. The request logic the handlers share (http/completions.py, http/forward.py);
the Runtime only holds the parts they use."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from proxy.apis import Api
from proxy.config import UpstreamSocket
from proxy.errors import ProxyError, UpstreamSocketRefused
from proxy.http.incoming import Incoming
from proxy.recording.recorder import Exchange
from proxy.recording.tap import Tap, client_secrets
from proxy.replay.conversation import Lane
from proxy.runtime import Runtime
from proxy.serving import Source
from proxy.upstream import Captured, PassThrough
from proxy.upstream.dialect import Dialect
from proxy.upstream.socket import Refused

# a request of the other endpoints (no completion API) is labelled with its lane as its api too:
# one word for one set of requests
OTHER = Lane.OTHER.value
TRACE_HEADERS = ("traceparent", "tracestate")  # a harness's W3C trace context


def tap(
    runtime: Runtime,
    incoming: Incoming,
    *,
    session: str,
    lane: str,
    api: Api | None,
    body: object,
    stream: bool,
    perf_start: float,
    model: str | None = None,
) -> Tap | None:
    """A Tap for this exchange, or None when nothing is recorded, dumped or traced (the usual
    case: then no copy of the exchange is made at all). `model`: the one the request asks for."""
    dumper = None if runtime.strict else runtime.dumper
    tracer = runtime.tracer if api is not None else None  # spans are of completions only
    if runtime.recorder is None and dumper is None and tracer is None:
        return None
    exchange = Exchange(
        session=session,
        lane=lane,
        api=api.name if api is not None else OTHER,
        method=incoming.method,
        path=incoming.path,
        source="",
        request=body,
        stream=stream,
        started=time.time(),
    )
    if incoming.transport != "http":  # said in the recording: it came as a WebSocket frame
        exchange.extra["transport"] = incoming.transport
    return Tap(
        exchange,
        recorder=runtime.recorder,
        dumper=dumper,
        secrets=client_secrets(incoming.headers, incoming.query),
        perf_start=perf_start,
        api=api,
        tracer=tracer,
        model=model,
        parent={k: v for k in TRACE_HEADERS if (v := incoming.headers.get(k))},
    )


async def send(
    runtime: Runtime,
    request: Incoming,
    body: bytes,
    headers: list[tuple[bytes, bytes]],
    tap: Tap | None = None,
    *,
    api: str,
    started: float,
    values: Mapping[str, str] | None = None,
    dialect: Dialect,
    parsed: dict[str, Any] | None = None,
) -> PassThrough:
    """The request upstream, its answer passed on as it arrives; `values`: {session} and
    {trajectory}, for an upstream per session; `dialect`: its API's way upstream; `parsed`: the
    body as an object, when the caller has it (an upstream socket sends it as a frame)."""
    metrics = runtime.metrics

    async def done(captured: Captured) -> None:
        assert captured.finished is not None  # PassThrough sets it before calling this
        metrics.upstream(api, started, captured.first_byte, captured.finished)
        if tap is not None:
            await tap.forwarded(captured)

    link, mode = request.link, runtime.settings.upstream_websocket
    sent = (request.raw_path, request.query, request.raw_headers, body)
    how: dict[str, Any] = {
        "on_complete": done, "keep_body": tap is not None, "values": values, "dialect": dialect
    }  # fmt: skip
    try:
        response = None
        # a client socket's live turn: over the upstream's socket, where it takes one (the one
        # place the leg is chosen; --upstream-websocket)
        if link is not None and not (
            mode is UpstreamSocket.NEVER or (mode is UpstreamSocket.AUTO and link.refused(values))
        ):
            try:
                response = await link.answer(*sent, parsed=parsed, **how)
                if tap is not None:
                    tap.exchange.extra["upstream_transport"] = "websocket"
            except Refused as refused:
                if mode is UpstreamSocket.ALWAYS:
                    raise UpstreamSocketRefused(
                        f"{refused}, and --upstream-websocket always sends a socket's live turns "
                        "over a WebSocket only: use auto to fall back to HTTP SSE, or never"
                    ) from None
                link.fall_back(refused, values)
        if response is None:
            response = await runtime.upstream.send(request.method, *sent, **how)
    except ProxyError as error:  # not answered: what was recorded or dumped says why
        if tap is not None:
            await tap.error(error)
        raise
    response.raw_headers.append((b"x-replay-source", Source.UPSTREAM.encode()))
    response.raw_headers.extend(headers)
    return response
