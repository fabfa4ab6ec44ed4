"""POST /v1/chat/completions: route -> parse -> engine.decide -> store -> render or forward."""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from proxy.conversation import Conversation, Lane, session_id
from proxy.engine import Diverged, Forward, Scripted, decide
from proxy.errors import PROXY_HEADERS, ProxyError, ReplayDiverged
from proxy.parse.chat import parse_chat
from proxy.render.chat import chat_completion, chat_stream
from proxy.routes.body import read_json
from proxy.runtime import Runtime
from proxy.splice import apply_chat
from proxy.streaming import EventStream

log = logging.getLogger("proxy.requests")
router = APIRouter()


@router.post("/v1/chat/completions", include_in_schema=True)
@router.post("/chat/completions", include_in_schema=False)
async def chat_completions(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    raw, body = await read_json(request, runtime.settings.max_body_bytes)
    conv = parse_chat(body)
    return await serve(request, runtime, conv, raw, body)


async def serve(
    request: Request, runtime: Runtime, conv: Conversation, raw: bytes, body: dict[str, Any]
) -> Response:
    started = time.perf_counter()
    session = session_id(request.headers, runtime.settings.session_header, conv)
    lane = conv.lane(subagent=runtime.settings.subagent_header in request.headers)
    headers = [(b"x-replay-session", session.encode())]
    if lane is not Lane.MAIN:
        response = await _forward(request, runtime, session, raw, headers)
        await runtime.sessions.record(session, lane, None)
        _log(session, lane, "upstream", "-", response.status_code, started)
        return response

    binding = await runtime.sessions.script_for(
        session, conv, request.headers.get("x-replay-trajectory")
    )
    decision = decide(
        conv,
        binding.trajectory,
        live_after_divergence=binding.state.live_reason == "diverged",
        policy=runtime.settings.on_divergence,
    )
    if isinstance(decision, Diverged):
        await runtime.sessions.record(session, lane, decision)
        name = binding.state.script_name
        _log(
            session, lane, "diverged", f"{decision.divergence.turn}/{decision.total}", 404, started
        )
        raise ReplayDiverged(
            f"session {session}: the request does not follow the script {name!r} at turn "
            f"{decision.divergence.turn}/{decision.total}: {decision.divergence.describe()}",
            param=decision.divergence.difference.path,
            session=session,
            script=name,
            **decision.divergence.as_dict(),
        )
    if isinstance(decision, Scripted):
        await runtime.sessions.record(session, lane, decision)
        turn = f"{decision.turn.number}/{decision.total}"
        _log(session, lane, "scripted", turn, 200, started)
        return _scripted(conv, decision, headers, binding.state.script_digest or "")
    assert isinstance(decision, Forward)
    if decision.splice:
        body["messages"] = apply_chat(body["messages"], decision.splice)
        raw = orjson.dumps(body)
        headers.append(
            (b"x-replay-spliced", str(sum(len(i.users) for i in decision.splice)).encode())
        )
    response = await _forward(request, runtime, session, raw, headers)
    await runtime.sessions.record(session, lane, decision)
    _log(session, lane, "upstream", str(decision.reason), response.status_code, started)
    return response


async def _forward(
    request: Request, runtime: Runtime, session: str, raw: bytes, headers: list[tuple[bytes, bytes]]
) -> Response:
    try:
        return await runtime.forward(request, raw, headers)
    except ProxyError:
        await runtime.sessions.record_error(session)  # the status says it was not answered
        raise


def _scripted(
    conv: Conversation, decision: Scripted, headers: list[tuple[bytes, bytes]], digest: str
) -> Response:
    turn = decision.turn
    headers += [(k.encode(), v.encode()) for k, v in PROXY_HEADERS.items()]
    headers += [
        (b"x-replay-source", b"scripted"),
        (b"x-replay-turn", f"{turn.number}/{decision.total}".encode()),
    ]
    completion_id = f"chatcmpl-replay-{digest[:12]}-{turn.number}"
    created = int(time.time())
    if conv.stream:
        events = chat_stream(
            turn,
            model=conv.model,
            completion_id=completion_id,
            created=created,
            include_usage=conv.include_usage,
        )
        return EventStream(events, headers)
    payload = chat_completion(turn, model=conv.model, completion_id=completion_id, created=created)
    response = Response(payload, media_type="application/json")
    response.raw_headers.extend(headers)
    return response


def _log(session: str, lane: Lane, source: str, turn: str, status: int, started: float) -> None:
    log.info(
        "session=%s lane=%s source=%s turn=%s status=%d ms=%.1f",
        session,
        lane,
        source,
        turn,
        status,
        (time.perf_counter() - started) * 1000,
    )
