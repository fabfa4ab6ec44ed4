"""Everything under /v1 that is not answered from a script goes upstream as it is.

In strict mode nothing goes upstream: such requests are answered from the recordings' exchanges
of the lane "other" (first unused equal request), or get an error. Served by proxy.http.front.
"""

from __future__ import annotations

import asyncio
import time

import orjson
from starlette.responses import Response

from proxy.apis import Api
from proxy.apis.keys import PLAIN
from proxy.http import relay
from proxy.http.incoming import Incoming
from proxy.http.inflight import answered
from proxy.http.recorded import answer_recorded
from proxy.http.relay import OTHER
from proxy.nesting import too_deep
from proxy.replay.conversation import Lane, session_header
from proxy.runtime import Runtime
from proxy.serving import Source

LANE = Lane.OTHER.value
NO_SESSION = "unsessioned"


async def forward(request: Incoming, runtime: Runtime, *, api: Api | None) -> Response:
    """`api`: the API that claims the path (its dialect upstream), if any."""
    started = time.perf_counter()
    session = (
        request.session
        or session_header(request.headers, runtime.settings.session_header)
        or NO_SESSION
    )
    values = upstream = None
    target = runtime.upstream.target
    if target is not None and not runtime.strict:  # an upstream per session
        values = {"session": session, "trajectory": request.trajectory or ""}
        # refused before anything is recorded: a value that is not a name (where() fills it),
        # a query that names a parameter the template sets
        upstream = runtime.upstream.where(values)
        target.own(request.query)
    body = None  # read only to record it, or to compare it in strict mode
    if runtime.strict or runtime.recorder is not None or runtime.dumper is not None:
        body = await asyncio.to_thread(_parsed, request) if request.large else _parsed(request)
    tap = relay.tap(
        runtime,
        request,
        session=session,
        lane=LANE,
        api=None,
        body=body,
        stream=False,
        perf_start=started,
    )
    if runtime.strict:
        recorded = await answer_recorded(request, runtime, session, LANE, body, [], tap)
        assert recorded is not None  # strict mode: the recorded answer, or an error raised
        response, source = recorded, Source.RECORDED
    else:
        source = Source.UPSTREAM
        if tap is not None:
            tap.exchange.source = source
            tap.exchange.upstream = upstream
        response = await relay.send(
            runtime,
            request,
            request.body,
            [],
            tap,
            api=OTHER,
            started=started,
            values=values,
            dialect=api.upstream if api is not None else PLAIN,
        )
    turn = f"{request.method} {request.path}"
    answered(runtime, OTHER, session, LANE, source, turn, response.status_code, started)
    return response


def _parsed(request: Incoming) -> object:
    raw = request.body
    if not raw:
        return None
    try:
        value = orjson.loads(raw)
        if not too_deep(value):  # nested too deep to be written out: kept as the text it is
            return value
    except orjson.JSONDecodeError:
        pass
    return raw.decode("utf-8", errors="replace")
