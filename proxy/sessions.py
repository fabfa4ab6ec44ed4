"""Which script a session gets, and the record of what each request of it got.

Binding order, first that applies, once per session (it then sticks):
1. a script PUT for the session through the admin API;
2. the trajectory named by the request's `x-replay-trajectory` header;
3. a loaded trajectory whose task (first user message) equals the session's, preferring one no
   other session has taken;
4. unless --bind-on-task, the first --trajectory no session has taken yet.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from proxy.conversation import Conversation, Lane
from proxy.engine import Decision, Diverged, Forward, ForwardReason, Scripted
from proxy.errors import BadRequest, NotFound
from proxy.library import Library
from proxy.names import is_valid_name
from proxy.store import Store
from proxy.store.state import SessionState
from proxy.trajectory import Trajectory


@dataclass(frozen=True, slots=True)
class Binding:
    trajectory: Trajectory | None
    state: SessionState


class Sessions:
    def __init__(self, store: Store, library: Library, *, bind_on_task: bool) -> None:
        self.store = store
        self.library = library
        self.bind_on_task = bind_on_task

    async def script_for(self, session: str, conv: Conversation, wanted: str | None) -> Binding:
        """The session's script, binding one first if it has none."""
        state = await self.store.get(session)
        if state is not None and state.script_digest is not None:
            trajectory = await self._resolve(state)
            if state.task_match is None and trajectory is not None and trajectory.task is not None:
                match = _same_task(trajectory.task, conv.task)  # an admin script, first request

                def note(s: SessionState) -> None:
                    s.task_match = match

                state = await self.store.update(session, note, now=time.time())
            return Binding(trajectory, state)
        trajectory, source = await self._choose(session, conv, wanted)
        if trajectory is None:
            return Binding(None, state or SessionState(session, time.time(), time.time()))
        task_match = None if trajectory.task is None else _same_task(trajectory.task, conv.task)

        def bind(s: SessionState) -> None:
            if s.script_digest is None:  # a concurrent first request may have bound it already
                s.bind(
                    name=trajectory.name,
                    digest=trajectory.digest,
                    source=source,
                    task_match=task_match,
                    turns=len(trajectory.turns),
                )

        state = await self.store.update(session, bind, now=time.time())
        if state.script_digest != trajectory.digest:
            return Binding(await self._resolve(state), state)
        return Binding(trajectory, state)

    async def _resolve(self, state: SessionState) -> Trajectory | None:
        assert state.script_digest is not None and state.script_name is not None
        if state.script_source == "admin":
            cached = self.library.cached(state.script_digest)
            if cached is not None:
                return cached
            data = await self.store.get_script(state.id)
            return self.library.admin(data, state.id) if data is not None else None
        return await self.library.find(state.script_name)

    async def _choose(
        self, session: str, conv: Conversation, wanted: str | None
    ) -> tuple[Trajectory | None, str]:
        if wanted is not None:
            if not is_valid_name(wanted):
                raise BadRequest(
                    f"x-replay-trajectory {wanted!r} is not a valid name "
                    "(letters, digits and . _ : - only)",
                    param="x-replay-trajectory",
                )
            found = await self.library.find(wanted)
            if found is None:
                where = self.library.folder or "the loaded trajectories (no --trajectory-dir)"
                raise NotFound(f"x-replay-trajectory: no trajectory named {wanted!r} in {where}")
            return found, "header"
        same_task = self.library.with_task(conv.task)
        for candidate in same_task:
            if await self.store.claim(candidate.name, session) == session:
                return candidate, "task"
        if same_task:
            return same_task[0], "task"
        if not self.bind_on_task:
            for candidate in self.library.files:
                if await self.store.claim(candidate.name, session) == session:
                    return candidate, "unclaimed"
        return None, ""

    async def status(self, state: SessionState) -> dict[str, Any]:
        """The exact status of a session, as the admin API reports it."""
        script: dict[str, Any] | None = None
        if state.script_digest is not None:
            trajectory = await self._resolve(state)
            script = {
                "name": state.script_name,
                "source": state.script_source,
                "task_match": state.task_match,
                "turns_total": state.turns_total,
                "tool_calls": trajectory.tool_call_count if trajectory else None,
                "skipped": [{"index": n.index, "reason": n.reason} for n in trajectory.skipped]
                if trajectory
                else [],
                "dropped": [{"index": n.index, "reason": n.reason} for n in trajectory.dropped]
                if trajectory
                else [],
            }
        divergence = dict(state.divergence) if state.divergence else None
        if divergence is not None:
            divergence["at"] = _iso(divergence.get("at"))
        return {
            "session": state.id,
            "phase": phase(state),
            "script": script,
            "turns_served": state.turns_served,
            "scripted_responses": state.scripted_responses,
            "divergence": divergence,
            "divergences": state.divergences,
            "live_since": _iso(state.live_since),
            "live_reason": state.live_reason,
            "forwarded": {lane.value: state.forwarded.get(lane.value, 0) for lane in Lane},
            "errors": state.errors,
            "created": _iso(state.created),
            "last_seen": _iso(state.last_seen),
        }

    async def record(self, session: str, lane: Lane, decision: Decision | None) -> SessionState:
        """Count what a request got. `decision` is None for requests outside the main lane."""
        now = time.time()

        def change(s: SessionState) -> None:
            if decision is None or isinstance(decision, Forward):
                s.forwarded[lane] = s.forwarded.get(lane, 0) + 1
            if isinstance(decision, Scripted):
                s.scripted_responses += 1
                s.turns_served = max(s.turns_served, decision.turn.number)
            elif isinstance(decision, Diverged):
                s.divergences += 1
                if s.divergence is None:
                    s.divergence = {**decision.divergence.as_dict(), "at": now}
            elif isinstance(decision, Forward) and decision.reason is not ForwardReason.NO_SCRIPT:
                if s.live_since is None:
                    s.live_since = now
                    s.live_reason = str(decision.reason)
                if decision.divergence is not None:
                    s.live_reason = str(ForwardReason.DIVERGED)  # live for good from here
                    s.divergences += 1
                    if s.divergence is None:
                        s.divergence = {**decision.divergence.as_dict(), "at": now}

        return await self.store.update(session, change, now=now)

    async def record_error(self, session: str) -> None:
        def change(s: SessionState) -> None:
            s.errors += 1

        await self.store.update(session, change, now=time.time())


def _same_task(recorded: str, sent: str | None) -> bool:
    return sent is not None and recorded.strip() == sent.strip()


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def phase(state: SessionState) -> str:
    """unscripted | replaying | served | diverged | live"""
    if state.script_digest is None:
        return "unscripted"
    if state.live_since is not None:
        return "live"
    if state.divergence is not None:
        return "diverged"
    return "replaying" if state.turns_served < state.turns_total else "served"
