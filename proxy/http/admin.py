"""The admin API: /replay/sessions (and each session's /faults, /restore verdict and /rollout). A
Bearer token is required when --admin-token is set."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
from fastapi import APIRouter, Depends, Query, Request, Response

from proxy import admin_token
from proxy.apis import Api
from proxy.errors import BadRequest, Forbidden, LoadError, NotFound, NotRecorded, Unauthorized
from proxy.formats import load_file
from proxy.formats.rollout import line as rollout_line
from proxy.http.body import read_body
from proxy.names import is_valid_name
from proxy.replay.faults import FaultError, parse_plan
from proxy.replay.restore import PENDING
from proxy.runtime import Runtime
from proxy.sessions.children import lane_session
from proxy.sessions.registry import branch_point
from proxy.sessions.status import faults, phase, restore_of
from proxy.store.state import BoundBy, SessionState


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


ADMIN_COOKIE = "replay_admin"  # the status page's sign-in: a signature, never the token


def token_matches(runtime: Runtime, given: str) -> bool:
    token = runtime.settings.admin_token
    return token is not None and admin_token.matches(token.get_secret_value(), given)


def signed_in(runtime: Runtime, request: Request) -> bool:
    """The request carries the status page's sign-in cookie, made with this proxy's token."""
    token, cookie = runtime.settings.admin_token, request.cookies.get(ADMIN_COOKIE)
    return (
        token is not None
        and cookie is not None
        and admin_token.signed_in(token.get_secret_value(), cookie, time.time())
    )


async def require_token(request: Request) -> None:
    """With an admin token, a Bearer token (or the status page's sign-in cookie), compared in
    constant time. Without one, the admin API is off, unless --insecure-admin opens it to anyone
    who reaches the port. Never a page of another site, and without a token never a host name a
    page could have pointed at this machine nor a request through a front (proxy.guard)."""
    runtime = _runtime(request)
    settings = runtime.settings
    page = request.method == "GET" and request.url.path == "/replay/ui"
    runtime.guard.admin(request.headers, page=page)
    if settings.admin_token is None:
        if settings.insecure_admin:
            return
        raise Forbidden(
            "the admin API is off: this proxy has no admin token (replay-proxy serve makes one "
            "at start and says where it wrote it); give one with --admin-token, or serve the "
            "admin API without one with --insecure-admin"
        )
    given = request.headers.get("authorization", "")
    bearer = given[7:] if given[:7].lower() == "bearer " else ""
    if not token_matches(runtime, bearer) and not signed_in(runtime, request):
        raise Unauthorized("the admin API needs 'Authorization: Bearer <admin token>'")


router = APIRouter(prefix="/replay", dependencies=[Depends(require_token)])


def _session_id(session: str) -> str:
    if not is_valid_name(session):
        raise BadRequest(
            f"{session[:80]!r} is not a valid session id (letters, digits and . _ : - only)",
            param="session",
        )
    return session


PAGE_DEFAULT = 100
PAGE_MOST = 1000


@router.get("/sessions")
async def list_sessions(
    request: Request,
    limit: int = Query(PAGE_DEFAULT, ge=1, le=PAGE_MOST),
    cursor: str | None = None,
) -> dict[str, Any]:
    """A page of sessions, oldest first; `next_cursor` asks for the next one."""
    runtime = _runtime(request)
    try:
        states, following = await runtime.store.page(cursor, limit)
    except ValueError as exc:
        raise BadRequest(f"cursor: {exc}; pass the next_cursor of a page", param="cursor") from None
    return {
        "object": "list",
        "data": [await runtime.sessions.status(s) for s in states],
        "has_more": following is not None,
        "next_cursor": following,
    }


@router.get("/sessions/{session}")
async def get_session(request: Request, session: str) -> dict[str, Any]:
    runtime = _runtime(request)
    state = await runtime.store.get(_session_id(session))
    if state is None:
        raise NotFound(f"no session {session!r}")
    return await runtime.sessions.status(state)


WAIT_MOST = 600.0  # seconds a restore read may be held
_POLL_FIRST, _POLL_MOST = 0.02, 0.5  # the store is read again this often, backing off: workers
# share it, so a verdict settled in another worker process is seen too


@router.get("/sessions/{session}/restore")
async def get_restore(
    request: Request, session: str, wait: float = Query(0.0, ge=0.0, le=WAIT_MOST)
) -> dict[str, Any]:
    """The session's restore verdict (proxy.replay.restore). With ?wait=S the answer is held
    until the verdict is settled (its replay ended) or S seconds have passed, so a runner can
    start the harness and block on this; a session not seen yet is waited for too."""
    runtime = _runtime(request)
    session = _session_id(session)
    deadline = time.monotonic() + wait
    pause = _POLL_FIRST
    while True:
        state = await runtime.store.get(session)
        verdict = restore_of(state) if state is not None else None
        settled = state is not None and state.restore is not None
        left = deadline - time.monotonic()
        if settled or left <= 0 or await request.is_disconnected():
            break
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, _POLL_MOST)
    if verdict is None:
        known = "no script yet" if state is not None else "not seen yet"
        verdict = {"verdict": PENDING, "why": f"session {session} is {known}"}
    return {
        "session": session,
        "phase": phase(state) if state is not None else None,
        "settled": settled,
        **verdict,
    }


@router.get("/sessions/{session}/rollout")
async def get_rollout(request: Request, session: str) -> Response:
    """The session's run so far (its replayed turns and its live ones, from its recording) as
    one NeMo-Gym rollout line (proxy.formats.rollout), each call's token ids with it."""
    runtime = _runtime(request)
    session = _session_id(session)
    if runtime.recorder is None:
        raise NotRecorded(
            "this proxy records no sessions: start it with --record-dir to export a session's "
            "rollout (or convert a recording: replay-proxy convert --to nemo-gym FILE)"
        )
    path = await runtime.recorder.newest(session)
    if path is None:
        raise NotRecorded(f"no recording of session {session!r} in {runtime.recorder.folder}")
    try:
        line = await asyncio.to_thread(_rollout_of, path, runtime.library.apis)
    except LoadError as exc:
        raise NotRecorded(
            f"session {session!r}: its recording holds no run to export: {exc}"
        ) from None
    return Response(line, media_type="application/json")


def _rollout_of(path: Path, apis: Mapping[str, Api]) -> bytes:
    return rollout_line(load_file(path, apis=apis))


@router.put("/sessions/{session}")
async def put_session(request: Request, session: str) -> dict[str, Any]:
    """Set the session's script: a trajectory in any supported format as the body; with
    ?turns=K the session replays only its first K turns, then goes live."""
    runtime = _runtime(request)
    session = _session_id(session)
    branch = branch_point(request.query_params.get("turns"), "turns")
    runtime.sessions.check_branch(branch, "turns")
    if branch is None:
        branch = runtime.sessions.replay_turns
    data = await read_body(request, runtime.settings.max_body_bytes)
    try:
        trajectory = await runtime.library.admin(data, session)
    except LoadError as exc:
        raise BadRequest(f"the trajectory was not accepted, the old script stays: {exc}") from None
    await runtime.store.put_script(session, data)

    def bind(s: SessionState) -> None:
        s.bind(
            name=trajectory.name,
            digest=trajectory.digest,
            by=BoundBy.ADMIN,
            task_match=None,
            turns=len(trajectory.turns),
            replay_turns=branch,
        )

    state = await runtime.store.update(session, bind, now=time.time())
    return await runtime.sessions.status(state)


@router.delete("/sessions/{session}", status_code=204)
async def delete_session(request: Request, session: str) -> Response:
    """Forget the session, and the lanes of the recorded children it replayed."""
    store = _runtime(request).store
    state = await store.get(_session_id(session))
    if not await store.delete(session):
        raise NotFound(f"no session {session!r}")
    for agent in sorted(set(state.children.values()) if state is not None else ()):
        await store.delete(lane_session(session, agent))
    return Response(status_code=204)


@router.get("/sessions/{session}/faults")
async def get_faults(request: Request, session: str) -> dict[str, Any]:
    """The session's fault plan (its own, else the --fault plan), with what has fired."""
    runtime = _runtime(request)
    state = await runtime.store.get(_session_id(session))
    if state is None:
        state = SessionState(id=session, created=0.0, last_seen=0.0)  # not seen yet: the flag's
    return {"session": session, **faults(state, runtime.sessions.fault_plan(state))}


@router.put("/sessions/{session}/faults")
async def put_faults(request: Request, session: str) -> dict[str, Any]:
    """Set the session's own fault plan: a JSON list of {"turn", "kind", "times", "seconds"}. It
    replaces the --fault plan for this session, and counts from zero."""
    runtime = _runtime(request)
    session = _session_id(session)
    data = await read_body(request, runtime.settings.max_body_bytes)
    try:
        plan = parse_plan(orjson.loads(data))
    except orjson.JSONDecodeError as exc:
        raise BadRequest(
            f"the faults were not accepted, the old ones stay: not JSON: {exc}"
        ) from None
    except FaultError as exc:
        raise BadRequest(f"the faults were not accepted, the old ones stay: {exc}") from None
    return await _set_faults(runtime, session, [f.model_dump(mode="json") for f in plan])


@router.delete("/sessions/{session}/faults", status_code=204)
async def delete_faults(request: Request, session: str) -> Response:
    """No faults for this session, the --fault plan's included."""
    runtime = _runtime(request)
    await _set_faults(runtime, _session_id(session), [])
    return Response(status_code=204)


async def _set_faults(runtime: Runtime, session: str, plan: list[dict[str, Any]]) -> dict[str, Any]:
    def change(s: SessionState) -> None:
        s.faults = plan
        s.faults_fired = [0] * len(plan)

    state = await runtime.store.update(session, change, now=time.time())
    return {"session": session, **faults(state, runtime.sessions.fault_plan(state))}
