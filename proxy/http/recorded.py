"""Outside the main lane: answer from a recording's exchange of the same lane. In strict mode, from
any loaded recording, or refuse; in resume mode before a session's hand-off, from the session's
own recording, else the call goes upstream (or, with --fence, is refused)."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from starlette.responses import Response

from proxy.errors import Fenced, ProxyError, ReplayDiverged
from proxy.http.answers import own_headers, rendered
from proxy.http.incoming import Incoming
from proxy.offload import Request
from proxy.recording.tap import Tap
from proxy.replay.presets import Preset
from proxy.replay.strict import Miss
from proxy.replay.trajectory import Trajectory
from proxy.runtime import Runtime
from proxy.serving import Source

log = logging.getLogger("proxy.requests")


async def answer_recorded(
    request: Incoming,
    runtime: Runtime,
    session: str,
    lane: str,
    body: Any,
    headers: list[tuple[bytes, bytes]],
    tap: Tap | None,
    preset: Preset | None = None,
    offloaded: Request | None = None,
    *,
    resumed: bool = False,
    fenced: str | None = None,
) -> Response | None:
    """The first unused recorded exchange of this lane with an equal request, or an error that
    names the closest recorded request. Nothing is answered from a request that differs.
    `offloaded`: the body is too large to read here; a worker process compares it. `resumed`:
    resume mode before the session's hand-off, where only the session's own recording answers,
    and a request it does not hold gets None (it goes upstream), unless `fenced`: the call, said
    for the error, when --fence keeps it from the upstream."""
    where = {
        "lane": lane,
        "method": request.method,
        "path": request.path,
        "body": body,
        "preset": preset,
    }
    sources = await _recordings(
        runtime, session, resumed=resumed, named=request.trajectory, fenced=fenced is not None
    )
    if resumed and fenced is None and not sources:
        return None  # the usual side call: a session with no recording of its own
    found: list[list[int]] = await _compared(runtime, offloaded, sources, where)
    for script, matches in zip(sources, found, strict=True):
        keys = [f"{script.digest[:16]}:{i}" for i in matches]
        taken = await runtime.sessions.use_recorded(session, keys) if keys else None
        if taken is not None:
            recorded = script.side[matches[keys.index(taken)]]
            ref = f"{script.filename}:{recorded.index + 1}"
            headers = own_headers(headers, Source.RECORDED.encode())
            log.debug("session=%s lane=%s answered from %s", session, lane, ref)
            on_complete = None
            if tap is not None:
                tap.exchange.source = Source.STRICT
                on_complete = functools.partial(tap.replayed, recorded, ref)
            made_in = runtime.library.apis.get(recorded.api)  # the API the recording was made in
            framing = made_in.framing if made_in is not None else None
            return rendered(
                framing.out([recorded.body]) if framing and recorded.stream else [recorded.body],
                headers,
                content_type=recorded.content_type.encode(),
                status=recorded.status,
                on_complete=on_complete,
            )
    if resumed and fenced is None:
        return None
    nearest: list[Miss] = await _compared(runtime, offloaded, sources, where, True)
    misses = zip(sources, nearest, strict=True)
    best = next(((s, m) for s, m in misses if m.closest is not None), None)
    if fenced is None:
        said = f"strict replay: session {session}, lane {lane}"
        error = _miss(ReplayDiverged, said, lane, best, session=session)
    else:
        said = (
            f"session {session} is fenced until its hand-off (--fence), so {fenced} is not sent "
            "upstream before the session's first live call, and the recording does not hold it"
        )
        error = _miss(Fenced, said, lane, best, session=session, call=fenced)
    if tap is not None:
        await tap.error(error)
    raise error


async def _compared(
    runtime: Runtime,
    offloaded: Request | None,
    sources: list[Trajectory],
    where: dict[str, Any],
    closest: bool = False,
) -> Any:
    """Per recording, its exchanges equal to the request (or its nearest one, `closest`): where
    the work cannot hold up other clients, for it grows with the request and the recordings (an
    8 MB request against 8 recordings held the event loop 16 s)."""
    strict = runtime.rules.recorded
    assert strict is not None
    if offloaded is not None and runtime.offload is not None:
        runtime.metrics.offloaded("match")
        if closest:
            return await runtime.offload.closest(offloaded, sources, where)
        return await runtime.offload.matching(offloaded, sources, where)
    compare = strict.closest if closest else strict.matching

    def work() -> list[Any]:
        return [compare(s.side, **where) for s in sources]

    # a thread even for a small request: the recordings' forms are made on first use, and they
    # may be large (side calls are few; a thread costs tens of microseconds)
    return await asyncio.to_thread(work)


async def _recordings(
    runtime: Runtime, session: str, *, resumed: bool, named: str | None, fenced: bool
) -> list[Trajectory]:
    """Strict mode: the session's own recording first, then every other loaded one. Resume mode:
    the session's own (bound, else the one the request names); a fenced session not bound yet
    and naming none takes every loaded one, as strict mode does, since its recording is among
    them."""
    state = await runtime.store.get(session)
    own = await runtime.sessions.resolve(state) if state and state.script_digest else None
    if resumed:
        if own is None and named is not None:
            own = await runtime.library.find(named)
        if own is not None or not fenced:
            return [own] if own is not None and own.side else []
    others = [t for t in runtime.library.all() if t.side and t is not own]
    return [own, *others] if own is not None else others


def _miss(
    kind: type[ProxyError],
    where: str,
    lane: str,
    best: tuple[Trajectory, Miss] | None,
    **extra: Any,
) -> ProxyError:
    extra["lane"] = lane
    if best is None or best[1].closest is None:
        return kind(
            f"{where}: the recordings hold no {lane} request to this endpoint", kind="miss", **extra
        )
    script, miss = best
    closest = script.side[miss.closest]  # type: ignore[index]
    d = miss.difference
    if d is None:
        return kind(
            f"{where}: no unused recorded {lane} request matches this one: the equal one, line "
            f"{closest.index + 1} of {script.filename}, has been answered already; the run makes "
            "this request more often than the recorded one did",
            kind="used",
            closest_line=closest.index + 1,
            **extra,
        )
    return kind(
        f"{where}: no unused recorded {lane} request matches this one "
        f"({miss.candidates} recorded in {script.filename}); the closest is line {closest.index + 1}, "
        f"which differs at {d.path or '$'}\n  recorded: {d.expected}\n  now:      {d.actual}",
        param=d.path or None,
        kind="miss",
        closest_line=closest.index + 1,
        **extra,
        **d.as_dict(),
    )
