"""What a session's requests showed of its workspace, kept in its state: which scripted calls' results
came back, how far they were compared, the first that differs, and the restore verdict settled
from them when the replay ends (the rules: proxy.replay.restore). Each runs inside a store update
(proxy.sessions.registry), so it may run again when a Redis transaction is retried: it only sets
what the state and the decision say."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.replay import restore
from proxy.replay.engine import Decision, Diverged, Forward, ForwardReason, Scripted, Stop
from proxy.replay.trajectory import Trajectory
from proxy.sessions import children
from proxy.store.state import SessionState


def observed(s: SessionState, decision: Decision, now: float) -> None:
    """What the request's tool results showed: which came back, how far they were compared, and
    the first that differs."""
    returned = decision.observations.returned
    if returned and len(returned) > len(s.results_returned):
        s.results_returned = list(returned)  # the history only grows
    s.results_checked = max(s.results_checked, decision.observations.checked)
    observed = decision.observations.divergence
    if observed is not None:
        s.observation_diffs += 1
        if s.observation is None:
            s.observation = {**observed.as_dict(), "at": now}


def settle(
    s: SessionState,
    decision: Decision,
    script: Trajectory,
    now: float,
    lanes: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> bool:
    """The restore verdict, once the replay ends: at the hand-off (the first live call), at an
    --after-script stop, at the script's last turn when it is a final answer (the harness ends
    its run there), or at a divergence (the history left the script: it cannot be a restore,
    whatever comes after). `lanes`: the replayed children's own verdicts, by agent id (None:
    not ended yet); while one has not ended, the verdict waits for it (settle_due)."""
    divergence = s.divergence
    if isinstance(decision, Forward):
        if decision.reason is ForwardReason.NO_SCRIPT:
            return False
        handoff = decision.held
        if divergence is None and decision.divergence is not None:
            divergence = decision.divergence.as_dict()
    elif isinstance(decision, Stop):
        handoff = decision.total
    elif isinstance(decision, Scripted):  # the script's last turn ends the run: no hand-off
        if not (decision.turn.final and decision.turn.number == decision.total):
            return False
        handoff = decision.total
    elif isinstance(decision, Diverged):
        handoff = decision.divergence.turn - 1
        if divergence is None and decision.divergence.kind != "observation":
            divergence = decision.divergence.as_dict()
    else:
        return False
    ended = {agent: (lanes or {}).get(agent) for agent in s.children.values()}
    verdict = _judged(s, script, handoff, divergence, ended)
    if verdict.verdict != restore.RESTART_ONLY and None in ended.values():
        s.restore_due = handoff  # a child still runs: its lane's end settles the verdict
        return False
    s.restore = {**verdict.as_dict(), "at": now}
    return True


def settle_due(
    s: SessionState, script: Trajectory, now: float, lanes: Mapping[str, Mapping[str, Any] | None]
) -> bool:
    """The verdict of a replay that ended while children were still running, once every
    replayed child's lane has ended."""
    if s.restore is not None or s.restore_due is None:
        return False
    ended = {agent: lanes.get(agent) for agent in s.children.values()}
    if None in ended.values():
        return False
    verdict = _judged(s, script, s.restore_due, s.divergence, ended)
    s.restore = {**verdict.as_dict(), "at": now}
    return True


def _judged(
    s: SessionState,
    script: Trajectory,
    handoff: int,
    divergence: Mapping[str, Any] | None,
    lanes: Mapping[str, Mapping[str, Any] | None],
) -> restore.Restore:
    return restore.judge(
        script,
        handoff,
        s.results_returned,
        observation=s.observation,
        divergence=divergence,
        not_started=children.not_started(script, s.children, handoff),
        lanes=lanes,
    )
