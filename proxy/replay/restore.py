"""The restore verdict: whether a resumed session's environment is the recorded one at its hand-off.

A runner that resumes a run (replays its first K turns, then hands off to the live model) needs to
know whether the harness's workspace came back as it was: every tool result the harness sent back
for the replayed turns must equal the recorded output (after the run's masks and the harness's
preset, which hold its per-run values). The verdict is settled once per session, when the replay
ends: at the first live call, at a --after-script stop, at the script's last turn when that is a
final answer, or at a divergence of the history.

    restored       every replayed call's result came back equal to the recorded one
    restart-only   a result differs, a result never came back, or the history left the script:
                   `first` says where (step, JSON path, both excerpts)
    unverified     nothing differs, but some replayed calls have no recorded output to compare
                   (a log that keeps no tool output; `unchecked` names them), or a replayed
                   child's lane ended unverified (`children_unsettled`); while a child's lane
                   has not ended the verdict waits (proxy.sessions.verdict)

Pure: the session's record (proxy.sessions) holds what the requests showed, and asks this.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.replay.trajectory import Child, Trajectory

RESTORED = "restored"
RESTART_ONLY = "restart-only"
UNVERIFIED = "unverified"
PENDING = "pending"  # not settled yet: the session has not reached its hand-off
VERDICTS = (RESTORED, RESTART_ONLY, UNVERIFIED)
UNCHECKED_LISTED = 50  # the verdict names this many unchecked calls, the first ones


@dataclass(frozen=True, slots=True)
class Restore:
    verdict: str
    handoff: int  # the scripted turns served before the hand-off
    calls: int  # the tool calls of those turns
    first: Mapping[str, Any] | None = None  # restart-only: the first mismatch
    unchecked: tuple[str, ...] = ()  # call ids with no recorded output to compare
    children_not_started: tuple[str, ...] = ()  # recorded children no live child replayed
    # replayed children whose lanes had not ended (or ended unverified) when the root's did
    children_unsettled: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "handoff_turn": self.handoff,
            "calls": self.calls,
            "first_mismatch": dict(self.first) if self.first is not None else None,
            "unchecked": list(self.unchecked[:UNCHECKED_LISTED]),
            "unchecked_count": len(self.unchecked),
            "children_not_started": list(self.children_not_started),
            "children_unsettled": list(self.children_unsettled),
        }


def judge(
    script: Trajectory,
    handoff: int,
    returned: Collection[str],
    *,
    observation: Mapping[str, Any] | None,
    divergence: Mapping[str, Any] | None,
    not_started: Sequence[Child] = (),
    lanes: Mapping[str, Mapping[str, Any] | None] | None = None,
) -> Restore:
    """The verdict for a session of `script` handed off after `handoff` turns. `returned`: the
    scripted call ids whose results the harness sent; `observation`: the first tool result
    unlike the recorded output (proxy.replay.engine.observe), its children's included;
    `divergence`: the first difference of the history, when the session left the script;
    `not_started`: recorded children of those turns that no live child replayed (their work is
    not in the workspace as recorded); `lanes`: each replayed child's own verdict, by its agent
    id (None: its lane has not ended yet)."""
    turns = script.turns[:handoff]
    calls = [(turn.number, call) for turn in turns for call in turn.tool_calls]
    missing = tuple(c.agent for c in not_started)
    first = observation if observation is not None else divergence
    if first is not None:
        return Restore(RESTART_ONLY, handoff, len(calls), dict(first), (), missing)
    if not_started:
        child = not_started[0]
        spawned = next((number for number, call in calls if call.id == child.spawned_by), handoff)
        first = {
            "turn": spawned,
            "kind": "child",
            "reason": f"the recorded subagent {child.agent} (spawned by call "
            f"{child.spawned_by or 'unknown'}) was never replayed: no live subagent asked "
            "its task",
            "path": "",
            "expected": (child.task or "")[:200],
            "actual": "no subagent with this task",
        }
        return Restore(RESTART_ONLY, handoff, len(calls), first, (), missing)
    lanes = lanes or {}
    for agent, lane in lanes.items():
        if lane is not None and lane.get("verdict") == RESTART_ONLY:
            first = {**(lane.get("first_mismatch") or {}), "lane": "subagent", "child": agent}
            return Restore(RESTART_ONLY, handoff, len(calls), first)
    got = returned if isinstance(returned, set | frozenset) else set(returned)
    for number, call in calls:
        if call.id not in got:
            return Restore(
                RESTART_ONLY,
                handoff,
                len(calls),
                {
                    "turn": number,
                    "kind": "observation",
                    "reason": f"the harness never sent the result of {call.name} call {call.id}: "
                    "the call was not run, so its effect on the workspace is not there",
                    "path": "",
                    "expected": f"a result for call {call.id}",
                    "actual": "nothing",
                },
            )
    unchecked = tuple(c.id for _, c in calls if c.id not in script.tool_outputs)
    pending = tuple(sorted(a for a, lane in lanes.items() if lane is None))
    unsure = tuple(sorted(a for a, lane in lanes.items() if lane and lane["verdict"] != RESTORED))
    if unchecked or pending or unsure:
        return Restore(UNVERIFIED, handoff, len(calls), None, unchecked, (), pending + unsure)
    return Restore(RESTORED, handoff, len(calls))


def allows_handoff(verdict: Mapping[str, Any] | None) -> bool:
    """--require-restored: only a session whose verdict is `restored` goes live."""
    return verdict is not None and verdict.get("verdict") == RESTORED


def describe(verdict: Mapping[str, Any]) -> str:
    """One line for the log and errors: the verdict, and where it was settled and why."""
    said = f"restore {verdict['verdict']} at the hand-off after turn {verdict['handoff_turn']}"
    first = verdict.get("first_mismatch")
    if first:
        where = first.get("path") or "$"
        said += (
            f": step {first.get('turn')}, {first.get('reason')} at {where} "
            f"(recorded: {str(first.get('expected'))[:120]!r}, "
            f"now: {str(first.get('actual'))[:120]!r})"
        )
    elif verdict.get("children_unsettled"):
        said += (
            f": the replayed subagents {', '.join(verdict['children_unsettled'])} had not ended "
            "their recorded turns as recorded when the root's replay did"
        )
    elif verdict.get("unchecked_count"):
        said += (
            f": {verdict['unchecked_count']} of {verdict['calls']} replayed calls have no "
            f"recorded output to compare (first: {verdict['unchecked'][0]})"
        )
    else:
        said += f": all {verdict['calls']} replayed tool results came back as recorded"
    return said
