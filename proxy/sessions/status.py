"""The status report of a session: exactly what was served, skipped, dropped, diverged, returned."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from proxy.replay.conversation import CONVERSATION_LANES
from proxy.replay.faults import Fault
from proxy.replay.restore import PENDING
from proxy.replay.trajectory import Trajectory
from proxy.sessions.children import lane_session
from proxy.store.state import SessionState


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def phase(state: SessionState) -> str:
    """unscripted | replaying | served | stopped | diverged | live"""
    if state.script_digest is None:
        return "unscripted"
    if state.live_since is not None:
        return "live"
    if state.divergence is not None:
        return "diverged"
    if state.stops:
        return "stopped"
    return "replaying" if state.turns_served < state.turns_planned else "served"


def _with_time(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {**record, "at": iso(record.get("at"))}


def report(
    state: SessionState,
    trajectory: Trajectory | None,
    plan: Sequence[Fault] = (),
    *,
    script_error: str | None = None,
) -> dict[str, Any]:
    """`script_error`: why the session's script could not be read (the rest is still known)."""
    script: dict[str, Any] | None = None
    calls: list[dict[str, Any]] = []
    not_due: set[str] = set()
    if state.script_digest is not None:
        returned = set(state.results_returned)
        if trajectory is not None:
            calls = [
                {"turn": t.number, "id": c.id, "name": c.name, "result_returned": c.id in returned}
                for t in trajectory.turns[: state.turns_planned]
                for c in t.tool_calls
            ]
            not_due = ended_with(state, trajectory) - returned
        script = {
            "name": state.script_name,
            "bound_by": state.script_source,
            "task_match": state.task_match,
            "turns_total": state.turns_total,
            "rounds": trajectory.rounds if trajectory is not None else None,
            "text_based": trajectory.text_based if trajectory is not None else None,
            "tool_calls": len(calls) if trajectory is not None else None,
            "skipped": [{"index": n.index, "reason": n.reason} for n in trajectory.skipped]
            if trajectory
            else [],
            "dropped": [{"index": n.index, "reason": n.reason} for n in trajectory.dropped]
            if trajectory
            else [],
            "error": script_error,
        }
    # the calls of served turns whose results were due and never came back (an unserved turn's
    # calls are said as the turn itself)
    missing = [
        c
        for c in calls
        if c["turn"] <= state.turns_served and not c["result_returned"] and c["id"] not in not_due
    ]
    incomplete = _incomplete(state, trajectory, missing, script_error)
    return {
        "session": state.id,
        "phase": phase(state),
        "script": script,
        "replay_turns": state.replay_turns,
        "turns_planned": state.turns_planned,
        "turns_served": state.turns_served,
        "scripted_responses": state.scripted_responses,
        "usage": {"recorded": state.usage_recorded, "estimated": state.usage_estimated},
        "tool_results": {
            "expected": len(calls),
            "returned": sum(c["result_returned"] for c in calls),
            "calls": calls,
            "missing": [c["id"] for c in missing],
            "not_due": [c["id"] for c in calls if c["id"] in not_due],
        },
        "complete": not incomplete,
        "incomplete": incomplete,
        "preset": state.preset,
        "divergence": _with_time(state.divergence),
        "divergences": state.divergences,
        "volatile": {"served": state.volatile_served, "first": _with_time(state.volatile)},
        "observations": {
            "differing": state.observation_diffs,
            "first": _with_time(state.observation),
        },
        "restore": restore_of(state),
        "stops": state.stops,
        "faults": faults(state, plan),
        "live_since": iso(state.live_since),
        "live_reason": state.live_reason,
        "live_upstream": state.upstream,
        "live_after_turn": state.live_after_turn,
        "forwarded": {
            lane.value: state.forwarded.get(lane.value, 0) for lane in CONVERSATION_LANES
        },
        "subagents": [
            {**a, "first_seen": iso(a.get("first_seen")), "last_seen": iso(a.get("last_seen"))}
            for a in state.subagents
        ],
        "children": _children(state, trajectory),
        "errors": state.errors,
        "created": iso(state.created),
        "last_seen": iso(state.last_seen),
    }


def _children(state: SessionState, trajectory: Trajectory | None) -> list[dict[str, Any]]:
    """The run's recorded children, each with the lane that replays it and the live child bound
    to it (None: no live child has asked its task yet)."""
    if trajectory is None or not trajectory.children:
        return []
    live = {agent: child for child, agent in state.children.items()}
    return [
        {
            "agent": c.agent,
            "spawned_by": c.spawned_by,
            "kind": c.kind,
            "task": (c.task or "")[:200],
            "turns": len(c.trajectory.turns),
            "session": lane_session(state.id, c.agent),
            "live_child": live.get(c.agent),
        }
        for c in trajectory.children
    ]


def restore_of(state: SessionState) -> dict[str, Any] | None:
    """The session's restore verdict (proxy.replay.restore); pending until its replay ends, None
    for a session with no script."""
    if state.script_digest is None:
        return None
    if state.restore is None:
        pending: dict[str, Any] = {
            "verdict": PENDING,
            "results_checked_turns": state.results_checked,
        }
        if state.restore_due is not None:  # the replay ended; replayed children still run
            pending["waiting_for_children_after_turn"] = state.restore_due
        return pending
    return {**state.restore, "at": iso(state.restore.get("at"))}


def ended_with(state: SessionState, trajectory: Trajectory) -> set[str]:
    """The calls whose results need not come back: those of the script's last turn when nothing
    could come after them. The script has no turn after theirs (the session replays the whole
    script: a branch's last turn was followed by more in the recorded run), and no request of
    this run came after that turn (none went live, got an --after-script stop answer or diverged,
    each of which would have held or owed them): the harness ended its run with them, as
    mini-swe-agent's submit command and OpenHands' finish tool do. A result the script records
    for them does not make them due: a harness's own log records the output of its way out,
    which it never sends to the model."""
    if not trajectory.turns or state.turns_planned != len(trajectory.turns):
        return set()
    if state.live_since is not None or state.stops or state.divergence is not None:
        return set()
    last = trajectory.turns[-1]
    if state.turns_served != last.number:
        return set()
    return {c.id for c in last.tool_calls}


def _incomplete(
    state: SessionState,
    trajectory: Trajectory | None,
    missing: list[dict[str, Any]],
    script_error: str | None,
) -> list[str]:
    """Why the replay is not complete, each said exactly; empty when it is: every planned turn
    was served and every result that was due came back."""
    if state.script_digest is None:
        return ["no script: nothing was replayed"]
    if trajectory is None:
        return [f"its script cannot be read: {script_error or 'unknown'}"]
    why = []
    if state.turns_served < state.turns_planned:
        first, last = state.turns_served + 1, state.turns_planned
        turns = f"turn {first}" if first == last else f"turns {first} to {last}"
        why.append(f"{turns} of {state.turns_planned} not served")
    if missing:
        calls = ", ".join(f"{c['id']} (turn {c['turn']}, {c['name']})" for c in missing)
        results = "1 tool result" if len(missing) == 1 else f"{len(missing)} tool results"
        why.append(f"{results} never came back: {calls}")
    return why


def faults(state: SessionState, plan: Sequence[Fault]) -> dict[str, Any]:
    """The session's fault plan, how often each fault fired, and each injection."""
    fired = state.faults_fired
    return {
        "set_by": "flag" if state.faults is None else "admin",
        "plan": [
            {**f.model_dump(mode="json"), "fired": fired[i] if i < len(fired) else 0}
            for i, f in enumerate(plan)
        ],
        "injected": [{**i, "at": iso(i["at"])} for i in state.injected],
    }
