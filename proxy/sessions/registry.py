"""Which script a session gets, and the record of what each request of it got.

Binding order, first that applies, once per session (it then sticks):
1. a script PUT for the session through the admin API;
2. the trajectory named by the request's `x-replay-trajectory` header;
3. a loaded trajectory whose task (first user message) equals the session's, preferring one no
   other session has taken;
4. unless --bind-on-task, the first --trajectory no session has taken yet.

A tool-less request binds only a text-based script of its own conversation (same system prompt
and task: proxy.replay.text_based); any other tool-less request binds and consumes nothing.

A session may branch: replay only the first K turns of its script, then go live. K comes from
the admin PUT, the request header `x-replay-turns`, or --replay-turns, and is fixed when the
session binds; a request that asks for another K later is refused, and the state stays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from proxy.errors import BadRequest, NotFound, ProxyError, TrajectoryUnusable
from proxy.lineage import SUBAGENTS_KEPT, Lineage
from proxy.names import is_valid_name
from proxy.replay import restore
from proxy.replay.conversation import Conversation, Lane
from proxy.replay.engine import (
    Decision,
    Diverged,
    Divergence,
    Forward,
    ForwardReason,
    Scripted,
    Stop,
)
from proxy.replay.faults import Fault, due, parse_plan
from proxy.replay.trajectory import Trajectory
from proxy.serving import Source
from proxy.sessions import children
from proxy.sessions.library import Library
from proxy.sessions.status import report
from proxy.sessions.verdict import observed, settle, settle_due
from proxy.store import Store
from proxy.store.state import BoundBy, Event, SessionState


class Binding(NamedTuple):  # not a frozen dataclass: one is made per request, at 3x the cost
    trajectory: Trajectory | None
    state: SessionState | None  # None: a session the store has not seen yet, with no script

    @property
    def live_after_divergence(self) -> bool:
        return self.state is not None and self.state.live_reason == "diverged"


class Outcome(NamedTuple):
    """What recording a request did: the session's state after it, the fault it gets (if any),
    and whether it settled the session's restore verdict (it is logged and counted once)."""

    state: SessionState
    fault: Fault | None
    settled: bool = False


BRANCH_HEADER = "x-replay-turns"


def branch_point(value: str | None, where: str = BRANCH_HEADER) -> int | None:
    """K of a branch, from a header or a query parameter; None when it is not given."""
    if value is None:
        return None
    text = value.strip()
    if not text.isdigit() or len(text) > 9:
        raise BadRequest(
            f"{where} must be a whole number of turns (0 or more), not {value[:40]!r}", param=where
        )
    return int(text)


class Sessions:
    def __init__(
        self,
        store: Store,
        library: Library,
        *,
        bind_on_task: bool,
        replay_turns: int | None = None,
        strict: bool = False,
        faults: tuple[Fault, ...] = (),
        require_restored: bool = False,
    ) -> None:
        self.store = store
        self.library = library
        self.bind_on_task = bind_on_task
        self.replay_turns = replay_turns  # --replay-turns: the branch point of every session
        self.strict = strict
        self.faults = faults  # --fault: the plan of every session without its own
        self.require_restored = require_restored  # --require-restored

    def holds_back(self, state: SessionState, decision: Forward) -> bool:
        """--require-restored: this live call is a hand-off the session's verdict does not allow
        (a session that was never scripted has nothing to restore)."""
        return (
            self.require_restored
            and decision.reason is not ForwardReason.NO_SCRIPT
            and not restore.allows_handoff(state.restore)
        )

    def fault_plan(self, state: SessionState) -> tuple[Fault, ...]:
        """The session's own plan (admin API), else the --fault plan."""
        if state.faults is None:
            return self.faults
        return parse_plan(state.faults)

    def check_branch(self, branch: int | None, where: str = BRANCH_HEADER) -> None:
        if branch is not None and self.strict:
            raise BadRequest(
                f"{where}: --mode strict replays a recording and never goes live, so it cannot "
                "branch; use --mode resume",
                param=where,
            )

    async def script_for(
        self,
        session: str,
        conv: Conversation,
        wanted: str | None,
        branch: int | None = None,
        *,
        fits: Callable[[Trajectory], bool] | None = None,
        whole: bool = False,
    ) -> Binding:
        """The session's script, binding one first if it has none. `branch`: the K the request
        asks for (x-replay-turns). `fits`: only a script it accepts is bound or returned (a
        tool-less request takes part only in a text-based script of its own conversation).
        `whole`: a recorded child's lane, which replays all of its script."""
        self.check_branch(branch)
        state = await self.store.get(session)
        if state is not None and state.script_digest is not None:
            trajectory = await self.resolve(state)
            if fits is not None and (trajectory is None or not fits(trajectory)):
                return Binding(None, state)  # a side call of the session: its script is not asked
            if branch is not None and branch != state.replay_turns:
                bound = (
                    "replays its whole script"
                    if state.replay_turns is None
                    else f"branches at turn {state.replay_turns}"
                )
                raise BadRequest(
                    f"{BRANCH_HEADER} (or the path's /k/{{K}}/): {branch}, but session "
                    f"{session} {bound}: the branch point is fixed when the session binds (give "
                    "it from its first request, or PUT its script again with ?turns=K)",
                    param=BRANCH_HEADER,
                )
            if state.task_match is None and trajectory is not None and trajectory.task is not None:
                match = _same_task(trajectory.task, conv.task)  # an admin script, first request

                def note(s: SessionState) -> None:
                    s.task_match = match

                state = await self.store.update(session, note, now=time.time())
            return Binding(trajectory, state)
        if wanted is None and not self.library.files and not self.library.with_task(conv.task):
            return Binding(None, state)  # nothing it could be bound to (a plain pass-through)
        trajectory, by = await self._choose(session, conv, wanted, fits)
        if trajectory is None:
            return Binding(None, state)
        task_match = None if trajectory.task is None else _same_task(trajectory.task, conv.task)
        # a child's lane replays its whole script: the cut is its root's (--replay-turns is not)
        replay_turns = None if whole else branch if branch is not None else self.replay_turns

        def bind(s: SessionState) -> None:
            if s.script_digest is None:  # a concurrent first request may have bound it already
                s.bind(
                    name=trajectory.name,
                    digest=trajectory.digest,
                    by=by,
                    task_match=task_match,
                    turns=len(trajectory.turns),
                    replay_turns=replay_turns,
                )

        state = await self.store.update(session, bind, now=time.time())
        if state.script_digest != trajectory.digest:  # a concurrent request bound another one
            other = await self.resolve(state)
            if fits is not None and (other is None or not fits(other)):
                return Binding(None, state)
            return Binding(other, state)
        return Binding(trajectory, state)

    async def child_for(
        self, session: str, key: str | None, conv: Conversation
    ) -> tuple[str, str] | None:
        """A subagent's request of root `session`, whose script holds its children: (the session
        id of the recorded child's lane, the child script's name) once the live child (`key`: its
        own id) is bound to one (proxy.sessions.children); None when it replays none and goes on
        as a subagent."""
        if key is None:
            return None
        state = await self.store.get(session)
        if state is None or state.script_digest is None:
            return None
        script = await self.resolve(state)
        if script is None or not script.children:
            return None
        agent = state.children.get(key)
        if agent is None:
            said = children.prompts(conv)
            candidate = children.choose(script, said, state.children, state)
            if candidate is None:
                return None
            chosen: list[str] = []

            def bind(s: SessionState) -> None:
                chosen.clear()
                known = s.children.get(key)
                if known is None:  # a concurrent child may have taken the candidate
                    known = children.choose(script, said, s.children, s)
                    if known is not None:
                        s.children[key] = known
                if known is not None:
                    chosen.append(known)

            await self.store.update(session, bind, now=time.time())
            if not chosen:
                return None
            agent = chosen[0]
        return children.lane_session(session, agent), children.script_name(script, agent)

    async def lanes(self, root: str, state: SessionState) -> dict[str, dict[str, Any] | None]:
        """The own verdict of each recorded child a live child replays (None: its lane has not
        ended), by agent id: the root's verdict waits on nothing, and says so."""
        found: dict[str, dict[str, Any] | None] = {}
        for agent in sorted(set(state.children.values())):
            lane = await self.store.get(children.lane_session(root, agent))
            found[agent] = lane.restore if lane is not None else None
        return found

    async def child_settled(self, root: str) -> dict[str, Any] | None:
        """A replayed child's lane has ended: its root's verdict, if it was waiting for its
        children and this was the last (then settled here); None otherwise."""
        state = await self.store.get(root)
        if state is None or state.restore is not None or state.restore_due is None:
            return None
        script = await self.resolve(state)
        if script is None:
            return None
        lanes = await self.lanes(root, state)
        if None in lanes.values():
            return None
        settled: list[dict[str, Any]] = []
        now = time.time()

        def change(s: SessionState) -> None:
            settled.clear()
            if settle_due(s, script, now, lanes) and s.restore is not None:
                settled.append(s.restore)

        await self.store.update(root, change, now=now)
        return settled[0] if settled else None

    async def child_observed(
        self, root: str, decision: Decision | None, *, refused: str | None = None
    ) -> None:
        """A child lane that left its recording: a tool result unlike the recorded one, its
        history leaving its script, a call past its recorded turns (live, or `refused` by the
        fence). The root's restore verdict counts it, as the child's work is part of the run;
        after the root's verdict was settled it can only make it worse."""
        noted = _left(decision, refused)
        if noted is None:
            return
        noted = {**noted, "at": time.time(), "lane": "subagent"}

        def note(s: SessionState) -> None:
            if s.observation is None:
                s.observation = noted
            if s.restore is not None and s.restore.get("verdict") != restore.RESTART_ONLY:
                s.restore = {**s.restore, "verdict": restore.RESTART_ONLY, "first_mismatch": noted}

        await self.store.update(root, note, now=time.time())

    async def resolve(self, state: SessionState) -> Trajectory | None:
        """The script the session is bound to: the very one (same digest), or an error."""
        assert state.script_digest is not None and state.script_name is not None
        if state.script_source == BoundBy.ADMIN:
            session = state.id
            found = await self.library.admin_script(
                state.script_digest, session, lambda: self.store.get_script(session)
            )
        else:
            found = await self.library.find(state.script_name)
        if found is not None and found.digest != state.script_digest:
            # a file read again (it was let go from the cache) after it was rewritten
            raise TrajectoryUnusable(
                f"session {state.id}: its script {state.script_name!r} has changed since the "
                "session bound it, so its turns would not be the ones it has followed; start a "
                "new session (or DELETE this one) to use the new script"
            )
        return found

    async def _choose(
        self,
        session: str,
        conv: Conversation,
        wanted: str | None,
        fits: Callable[[Trajectory], bool] | None,
    ) -> tuple[Trajectory | None, BoundBy]:
        """The session's script and how it was chosen (None: none fits)."""
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
            return (found if fits is None or fits(found) else None), BoundBy.HEADER
        same_task = self.library.with_task(conv.task)
        if fits is not None:
            same_task = [t for t in same_task if fits(t)]
        for candidate in same_task:
            if await self.store.claim(candidate.name, session) == session:
                return candidate, BoundBy.TASK
        if same_task:
            return same_task[0], BoundBy.TASK
        if not self.bind_on_task:
            for candidate in self.library.files:
                if fits is not None and not fits(candidate):
                    continue
                if await self.store.claim(candidate.name, session) == session:
                    return candidate, BoundBy.UNCLAIMED
        return None, BoundBy.UNCLAIMED

    async def status(self, state: SessionState) -> dict[str, Any]:
        """The exact status of a session, as the admin API reports it."""
        trajectory, problem = None, None
        if state.script_digest is not None:
            try:
                trajectory = await self.resolve(state)
            except ProxyError as exc:  # one session's script, not the whole list
                problem = exc.message
        return report(state, trajectory, self.fault_plan(state), script_error=problem)

    async def record(
        self,
        session: str,
        lane: Lane,
        decision: Decision | None,
        *,
        messages: int = 0,
        preset: str | None = None,
        upstream: str | None = None,
        refused: bool = False,
        lineage: Lineage | None = None,
        script: Trajectory | None = None,
        lanes: Mapping[str, Mapping[str, Any] | None] | None = None,
    ) -> Outcome:
        """Count what a request got, and fire the fault planned for its turn, if one is left.
        `decision` is None for requests outside the main lane; `messages` is the request's
        message count (the replay/live boundary for dumps); `preset` the harness recognised;
        `upstream` where it is forwarded, when that depends on the session. `refused`: strict
        mode turned away a request it would otherwise have forwarded (an error, never counted
        as forwarded). `lineage`: a subagent's request, whose child and parent the status lists.
        `script`: the main lane's script, whose restore verdict is settled when the replay ends;
        `lanes`: its replayed children's own verdicts (Sessions.lanes)."""
        now = time.time()
        fired: list[Fault] = []
        settled: list[bool] = []
        event = _event(session, lane, decision, now)
        if lineage is not None:
            event["detail"] = lineage.describe()[:300]
        if refused:
            event["source"], event["detail"] = (
                Source.REFUSED,
                "strict replay: no recording to replay",
            )
        plain = event["source"], event["detail"]

        def change(s: SessionState) -> None:
            # a store may run the change again (a Redis transaction retried): from the start
            settled.clear()
            fired.clear()
            event["source"], event["detail"] = plain
            if refused:
                s.errors += 1
                return
            if decision is not None:
                observed(s, decision, now)
                if (
                    script is not None
                    and s.restore is None
                    and settle(s, decision, script, now, lanes)
                ):
                    settled.append(True)
                    verdict = f"restore: {s.restore['verdict']}"  # type: ignore[index]
                    event["detail"] = f"{event['detail']}; {verdict}".lstrip("; ")
                root = lane is not Lane.SUBAGENT  # a child lane's cut is its root's
                if isinstance(decision, Forward) and root and self.holds_back(s, decision):
                    s.errors += 1  # refused its hand-off: not live, nothing forwarded
                    event["source"] = Source.REFUSED
                    event["detail"] = f"{event['detail']}; --require-restored: not handed off"
                    return
            if decision is None or isinstance(decision, Forward):
                s.forwarded[str(lane)] = s.forwarded.get(str(lane), 0) + 1
            if lineage is not None:
                _subagent(s, lineage, now)
            if preset is not None:
                s.preset = preset
            if upstream is not None:
                s.upstream = upstream
            if decision is None:
                return
            if isinstance(decision, Scripted):
                fault = None
                if s.faults is not None or self.faults:  # most sessions have no plan
                    fault = _fire(s, self.fault_plan(s), decision.turn.number, now)
                if fault is not None:
                    fired.append(fault)
                    event["source"], event["detail"] = Source.FAULT, f"{fault.label} injected"
                    if not fault.serves:
                        return  # the turn was not served: the request gets the fault instead
                s.scripted_responses += 1
                s.turns_served = max(s.turns_served, decision.turn.number)
                if decision.turn.usage is None:
                    s.usage_estimated += 1
                else:
                    s.usage_recorded += 1
                if decision.volatile is not None:
                    s.volatile_served += 1
                    if s.volatile is None:
                        s.volatile = {**decision.volatile.as_dict(), "at": now}
            elif isinstance(decision, Stop):
                s.stops += 1
            elif isinstance(decision, Diverged):
                _note_divergence(s, decision.divergence, now)
            elif isinstance(decision, Forward):
                if s.prefix_messages is None:
                    s.prefix_messages = messages
                if decision.reason is not ForwardReason.NO_SCRIPT and s.live_since is None:
                    s.live_since = now
                    s.live_reason = str(decision.reason)
                    s.live_after_turn = decision.held
                if decision.divergence is not None:
                    s.live_reason = str(ForwardReason.DIVERGED)  # live for good from here
                    _note_divergence(s, decision.divergence, now)

        state = await self.store.update(session, change, now=now, event=event)
        return Outcome(state, fired[0] if fired else None, bool(settled))

    async def use_recorded(self, session: str, candidates: list[str]) -> str | None:
        """Strict mode: take the first candidate exchange not yet used to answer this session."""
        taken: list[str] = []

        def change(s: SessionState) -> None:
            taken.clear()
            for index in candidates:
                if index not in s.recorded_used:
                    s.recorded_used.append(index)
                    taken.append(index)
                    return

        now = time.time()

        def event(s: SessionState) -> Event | None:
            if not taken:
                return None
            return {
                "at": now,
                "session": session,
                "lane": "-",
                "source": Source.RECORDED,
                "turn": "-",
                "detail": taken[0],
            }

        await self.store.update(session, change, now=now, event=event)
        return taken[0] if taken else None

    async def record_error(self, session: str, lane: str, detail: str) -> None:
        def change(s: SessionState) -> None:
            s.errors += 1

        now = time.time()
        event = {
            "at": now,
            "session": session,
            "lane": lane,
            "source": Source.ERROR,
            "turn": "-",
            "detail": detail[:200],
        }
        await self.store.update(session, change, now=now, event=event)


def _fire(s: SessionState, plan: tuple[Fault, ...], turn: int, now: float) -> Fault | None:
    """The fault this request of turn `turn` gets, counted; None when none is left."""
    index = due(plan, s.faults_fired, turn)
    if index is None:
        return None
    if len(s.faults_fired) < len(plan):
        s.faults_fired.extend([0] * (len(plan) - len(s.faults_fired)))
    s.faults_fired[index] += 1
    s.injected.append({"turn": turn, "kind": plan[index].label, "at": now})
    del s.injected[:-INJECTED_KEPT]
    return plan[index]


INJECTED_KEPT = 200  # a session's status lists its latest injections


def _left(decision: Decision | None, refused: str | None) -> dict[str, Any] | None:
    """How a child lane's request left its recording, as a mismatch of its root; None when it
    did not."""
    if refused is not None:
        return {"kind": "child", "reason": refused, "path": "", "expected": "", "actual": ""}
    if decision is None:
        return None
    unlike = decision.observations.divergence
    if unlike is None and isinstance(decision, Diverged):
        unlike = decision.divergence
    if unlike is None and isinstance(decision, Forward):
        if decision.reason is ForwardReason.NO_SCRIPT:
            return None
        unlike = decision.divergence
        if unlike is None:
            return _past(decision.held, f"went live ({decision.reason})")
    if unlike is None and isinstance(decision, Stop):
        return _past(decision.total, "was answered --after-script stop's final turn")
    return unlike.as_dict() if unlike is not None else None


def _past(held: int, what: str) -> dict[str, Any]:
    return {
        "turn": held + 1,
        "kind": "child",
        "reason": f"a subagent asked for more than its {held} recorded turns and {what}: its "
        "work from there is not the recorded run's",
        "path": "",
        "expected": f"at most {held} turns",
        "actual": f"turn {held + 1}",
    }


def _subagent(s: SessionState, lineage: Lineage, now: float) -> None:
    """Count a subagent's request under its child and parent (one entry per pair)."""
    for entry in s.subagents:
        if entry["child"] == lineage.child and entry["parent"] == lineage.parent:
            entry["requests"] += 1
            entry["last_seen"] = now
            entry["kind"] = lineage.kind or entry["kind"]
            return
    s.subagents.append({**lineage.as_dict(), "requests": 1, "first_seen": now, "last_seen": now})
    del s.subagents[:-SUBAGENTS_KEPT]


def _event(session: str, lane: str, decision: Decision | None, now: float) -> Event:
    source, turn, detail = Source.UPSTREAM, "-", ""
    if isinstance(decision, Scripted):
        source, turn = Source.SCRIPTED, f"{decision.turn.number}/{decision.total}"
    elif isinstance(decision, Stop):
        source, detail = Source.STOP, f"all {decision.total} turns served"
    elif isinstance(decision, Diverged):
        source, turn = Source.DIVERGED, str(decision.divergence.turn)
        detail = decision.divergence.describe()
    elif isinstance(decision, Forward):
        detail = str(decision.reason)
        if decision.divergence is not None:
            detail = f"diverged, live: {decision.divergence.describe()}"
    if decision is not None and decision.observations.divergence is not None:
        detail = f"{detail}; observation differs: {decision.observations.divergence.difference.path}".lstrip(
            "; "
        )
    return {
        "at": now,
        "session": session,
        "lane": str(lane),
        "source": source,
        "turn": turn,
        "detail": detail[:300],
    }


def _note_divergence(s: SessionState, divergence: Divergence, now: float) -> None:
    if divergence.kind == "observation":
        return  # counted with the observations
    s.divergences += 1
    if s.divergence is None:
        s.divergence = {**divergence.as_dict(), "at": now}


def _same_task(recorded: str, sent: str | None) -> bool:
    return sent is not None and recorded.strip() == sent.strip()
