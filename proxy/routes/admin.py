"""The admin API: /replay/sessions. A Bearer token is required when --admin-token is set."""

from __future__ import annotations

import hmac
import time
from typing import Any

from fastapi import APIRouter, Depends, Request, Response

from proxy.errors import BadRequest, LoadError, NotFound, Unauthorized
from proxy.names import is_valid_name
from proxy.routes.body import read_body
from proxy.runtime import Runtime
from proxy.store.state import SessionState


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


async def require_token(request: Request) -> None:
    token = _runtime(request).settings.admin_token
    if token is None:
        return
    given = request.headers.get("authorization", "")
    expected = f"Bearer {token.get_secret_value()}"
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unauthorized("the admin API needs 'Authorization: Bearer <admin token>'")


router = APIRouter(prefix="/replay", dependencies=[Depends(require_token)])


def _session_id(session: str) -> str:
    if not is_valid_name(session):
        raise BadRequest(
            f"{session[:80]!r} is not a valid session id (letters, digits and . _ : - only)",
            param="session",
        )
    return session


@router.get("/sessions")
async def list_sessions(request: Request) -> dict[str, Any]:
    runtime = _runtime(request)
    states = sorted(await runtime.store.sessions(), key=lambda s: s.created)
    return {"object": "list", "data": [await runtime.sessions.status(s) for s in states]}


@router.get("/sessions/{session}")
async def get_session(request: Request, session: str) -> dict[str, Any]:
    runtime = _runtime(request)
    state = await runtime.store.get(_session_id(session))
    if state is None:
        raise NotFound(f"no session {session!r}")
    return await runtime.sessions.status(state)


@router.put("/sessions/{session}")
async def put_session(request: Request, session: str) -> dict[str, Any]:
    """Set the session's script: a trajectory in any supported format as the body."""
    runtime = _runtime(request)
    session = _session_id(session)
    data = await read_body(request, runtime.settings.max_body_bytes)
    try:
        trajectory = runtime.library.admin(data, session)
    except LoadError as exc:
        raise BadRequest(f"the trajectory was not accepted, the old script stays: {exc}") from None
    await runtime.store.put_script(session, data)

    def bind(s: SessionState) -> None:
        s.bind(
            name=trajectory.name,
            digest=trajectory.digest,
            source="admin",
            task_match=None,
            turns=len(trajectory.turns),
        )

    state = await runtime.store.update(session, bind, now=time.time())
    return await runtime.sessions.status(state)


@router.delete("/sessions/{session}", status_code=204)
async def delete_session(request: Request, session: str) -> Response:
    if not await _runtime(request).store.delete(_session_id(session)):
        raise NotFound(f"no session {session!r}")
    return Response(status_code=204)
