"""POST /v1/chat/completions, /v1/responses and /v1/messages: one path for all three APIs.

route -> parse -> engine.decide (pure) -> store -> render or forward.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from proxy.apis import ANTHROPIC, CHAT, RESPONSES, Api
from proxy.conversation import Conversation, Lane, session_id
from proxy.engine import Diverged, Divergence, Forward, Scripted, Stop, decide
from proxy.errors import PROXY_HEADERS, NotFound, ProxyError, ReplayDiverged
from proxy.render.chat import chat_message
from proxy.routes.body import read_json
from proxy.routes.strict import answer_recorded
from proxy.runtime import Runtime, new_exchange
from proxy.streaming import JSON, SSE, Rendered
from proxy.tap import Tap, dump_record
from proxy.trajectory import Trajectory, Turn

log = logging.getLogger("proxy.requests")
router = APIRouter()

STOP_TEXT = (
    "[replay-proxy] The script is complete: all {total} scripted turns were served, and "
    "--after-script stop ends the run here instead of going live."
)


@router.post("/v1/chat/completions", include_in_schema=True)
@router.post("/chat/completions", include_in_schema=False)
async def chat_completions(request: Request) -> Response:
    return await serve(request, CHAT)


@router.post("/v1/responses", include_in_schema=True)
@router.post("/responses", include_in_schema=False)
async def responses(request: Request) -> Response:
    return await serve(request, RESPONSES)


@router.post("/v1/messages", include_in_schema=True)
@router.post("/messages", include_in_schema=False)
async def messages(request: Request) -> Response:
    """Anthropic Messages API (Claude Code calls /v1/messages?beta=true: the query is ignored)."""
    return await serve(request, ANTHROPIC)


async def serve(request: Request, api: Api) -> Response:
    runtime: Runtime = request.app.state.runtime
    raw, body = await read_json(request, runtime.settings.max_body_bytes)
    conv = api.parse(body)
    started = time.perf_counter()
    session = session_id(request.headers, runtime.settings.session_header, conv)
    parent = request.headers.get(runtime.settings.subagent_header)
    lane = conv.lane(subagent=parent is not None)
    headers = [(b"x-replay-session", session.encode())]
    exchange = new_exchange(
        request, session=session, lane=lane, api=api.name, body=body, stream=conv.stream
    )
    live = not runtime.strict
    tap = runtime.tap(request, exchange, perf_start=started, dump=live)

    if lane is not Lane.MAIN:
        if not live:
            return await answer_recorded(
                request, runtime, session, lane, body, headers, tap, started
            )
        state = await runtime.sessions.record(session, lane, None)
        _dump_context(tap, api, conv, session, parent, lane, state.prefix_messages, body)
        exchange.source = "upstream"
        response = await _forward(request, runtime, session, raw, headers, tap)
        _log(session, lane, "upstream", "-", response.status_code, started)
        return response

    binding = await runtime.sessions.script_for(
        session, conv, request.headers.get("x-replay-trajectory")
    )
    decision = decide(
        conv,
        binding.trajectory,
        live_after_divergence=binding.state.live_reason == "diverged",
        rules=runtime.rules,
        body=body if runtime.strict else None,
    )
    state = await runtime.sessions.record(session, lane, decision, messages=conv.message_count)
    if decision.observations.divergence is not None and not isinstance(decision, Diverged):
        log.warning("session=%s %s", session, decision.observations.divergence.describe())

    if isinstance(decision, Diverged):
        error = _diverged(session, binding.trajectory, decision)
        _log(
            session,
            lane,
            "diverged",
            f"{decision.divergence.turn}/{decision.total}",
            error.status,
            started,
        )
        if tap is not None:
            exchange.source = "error"
            await tap.failed(error.status, error.body())
        raise error
    if isinstance(decision, Scripted | Stop):
        return await _answer(
            api, conv, body, decision, headers, binding.trajectory, tap, session, started
        )

    assert isinstance(decision, Forward)
    if not live:
        raise NotFound(
            f"strict replay: session {session} has no recording to replay (--mode strict never "
            "forwards upstream); bind one with x-replay-trajectory, by its task, or the admin API"
        )
    history = body.get(api.history)
    if isinstance(history, list) and binding.trajectory is not None:
        # splice first: its positions are those of the history as the client sent it
        spliced = api.splice(history, decision.splice) if decision.splice else history
        cleaned = api.clean(spliced)
        if cleaned is not None or decision.splice:
            body[api.history] = cleaned if cleaned is not None else spliced
            raw = orjson.dumps(body)
            exchange.forwarded = body
        if decision.splice:
            count = sum(len(i.users) for i in decision.splice)
            headers.append((b"x-replay-spliced", str(count).encode()))
    _dump_context(tap, api, conv, session, parent, lane, state.prefix_messages, body)
    exchange.source = "upstream"
    response = await _forward(request, runtime, session, raw, headers, tap)
    _log(session, lane, "upstream", str(decision.reason), response.status_code, started)
    return response


def _dump_context(
    tap: Tap | None,
    api: Api,
    conv: Conversation,
    session: str,
    parent: str | None,
    lane: Lane,
    prefix: int | None,
    sent: dict[str, Any],
) -> None:
    if tap is None or tap.dumper is None:
        return
    tap.dump = dump_record(
        session=session,
        parent=parent,
        lane=lane,
        turn=len(conv.replies) + 1,
        started=tap.exchange.started,
        prefix=prefix,
        messages=sent.get(api.history),
    )


async def _forward(
    request: Request,
    runtime: Runtime,
    session: str,
    raw: bytes,
    headers: list[tuple[bytes, bytes]],
    tap: Tap | None,
) -> Response:
    try:
        return await runtime.forward(request, raw, headers, tap)
    except ProxyError as error:
        await runtime.sessions.record_error(session)  # the status says it was not answered
        if tap is not None:
            tap.exchange.source = "error"
            await tap.failed(error.status, error.body())
        raise


def _diverged(session: str, script: Trajectory | None, decision: Diverged) -> ReplayDiverged:
    d: Divergence = decision.divergence
    name = script.name if script else None
    where = f"session {session}, lane main, step {d.turn}/{decision.total}"
    if d.kind == "beyond":
        message = f"strict replay: {where}: {d.reason}"
    elif d.kind == "request":
        message = (
            f"strict replay: {where} of {name!r}: {d.reason} at {d.difference.path or '$'}\n"
            f"  recorded: {d.difference.expected}\n  now:      {d.difference.actual}"
        )
    else:
        message = f"session {session}: the request does not follow the script {name!r} at turn {d.turn}/{decision.total}: {d.describe()}"
    return ReplayDiverged(
        message,
        param=d.difference.path or None,
        session=session,
        lane="main",
        script=name,
        **d.as_dict(),
    )


async def _answer(
    api: Api,
    conv: Conversation,
    body: dict[str, Any],
    decision: Scripted | Stop,
    headers: list[tuple[bytes, bytes]],
    script: Trajectory | None,
    tap: Tap | None,
    session: str,
    started: float,
) -> Response:
    if isinstance(decision, Stop):
        turn = Turn(decision.total + 1, -1, STOP_TEXT.format(total=decision.total), None, ())
        label, source = "stop", b"stop"
    else:
        turn = decision.turn
        label, source = f"{turn.number}/{decision.total}", b"scripted"
    headers += [(k.encode(), v.encode()) for k, v in PROXY_HEADERS.items()]
    headers += [(b"x-replay-source", source), (b"x-replay-turn", label.encode())]
    key = f"replay-{script.digest[:12] if script else 'none'}-{turn.number}"
    recorded = turn.recorded
    if (
        recorded is not None
        and recorded.stream == conv.stream
        and recorded.status == 200
        and recorded.api == api.name
    ):
        parts = [recorded.body]  # strict replay of a recording: the answer exactly as recorded
        content_type = recorded.content_type.encode()
    elif conv.stream:
        parts = api.stream(turn, conv, body, key)
        content_type = SSE
    else:
        parts = [api.whole(turn, conv, body, key)]
        content_type = JSON
    _log(session, Lane.MAIN, source.decode(), label, 200, started)
    on_complete = None
    if tap is not None:
        tap.exchange.source = "scripted"
        message = chat_message(turn)

        async def on_complete() -> None:
            await tap.rendered(parts, stream=conv.stream, message=message, turn=label)

    return Rendered(parts, headers, content_type=content_type, on_complete=on_complete)


def _log(
    session: str, lane: Lane | str, source: str, turn: str, status: int, started: float
) -> None:
    log.info(
        "session=%s lane=%s source=%s turn=%s status=%d ms=%.1f",
        session,
        lane,
        source,
        turn,
        status,
        (time.perf_counter() - started) * 1000,
    )
