"""The per-request decision, pure: (script, session flags, request) -> Scripted | Forward | Diverged.

Turn k is due when the request history holds exactly the first k scripted turns, matched by
tool-call id (text-only turns by their text). It is derived from the history, never from a
counter, so a retried or re-sent request gets the same turn again, and two concurrent requests
with the same history get the same turn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from proxy.conversation import Conversation, Reply
from proxy.difference import Difference, around, first_mismatch, render
from proxy.splice import Insertion, plan_splice
from proxy.trajectory import Trajectory, Turn


class DivergencePolicy(StrEnum):
    ERROR = "error"  # answer with an error naming the first difference
    LIVE = "live"  # forward this request and the rest of the session upstream


class ForwardReason(StrEnum):
    NO_SCRIPT = "no script"
    SCRIPT_DONE = "script used up"
    DIVERGED = "diverged"


@dataclass(frozen=True, slots=True)
class Divergence:
    turn: int  # 1-based number of the turn the history disagrees at
    reason: str
    difference: Difference

    def describe(self) -> str:
        return f"{self.reason}: {self.difference.describe()}"

    def as_dict(self) -> dict[str, object]:
        return {"turn": self.turn, "reason": self.reason, **self.difference.as_dict()}


@dataclass(frozen=True, slots=True)
class Scripted:
    turn: Turn
    total: int


@dataclass(frozen=True, slots=True)
class Forward:
    reason: ForwardReason
    held: int = 0  # scripted turns the history holds
    splice: tuple[Insertion, ...] = ()
    divergence: Divergence | None = None  # set when the session goes live on a divergence


@dataclass(frozen=True, slots=True)
class Diverged:
    divergence: Divergence
    total: int


Decision = Scripted | Forward | Diverged


def decide(
    conv: Conversation,
    script: Trajectory | None,
    *,
    live_after_divergence: bool = False,
    policy: DivergencePolicy = DivergencePolicy.ERROR,
) -> Decision:
    """The decision for a main-lane request (tool-bearing, not a subagent's)."""
    if script is None:
        return Forward(ForwardReason.NO_SCRIPT)
    if live_after_divergence:
        return Forward(ForwardReason.DIVERGED)
    turns = script.turns
    held, divergence = match_history(conv, turns)
    if divergence is None and held < len(turns):
        divergence = _missing_tool(conv, turns[held])
        if divergence is None:
            return Scripted(turns[held], len(turns))
    if divergence is not None:
        if policy is DivergencePolicy.LIVE:
            splice = plan_splice(conv, script, held)
            return Forward(ForwardReason.DIVERGED, held, splice, divergence)
        return Diverged(divergence, len(turns))
    return Forward(ForwardReason.SCRIPT_DONE, held, plan_splice(conv, script, held))


def match_history(conv: Conversation, turns: tuple[Turn, ...]) -> tuple[int, Divergence | None]:
    """How many scripted turns the history holds, and the first disagreement if any.

    Assistant messages after the last scripted turn are the live part of the run."""
    for i, reply in enumerate(conv.replies):
        if i >= len(turns):
            return len(turns), None
        difference = _compare(reply, turns[i])
        if difference is not None:
            reason = f"the history's assistant message {i + 1} is not scripted turn {i + 1}"
            return i, Divergence(i + 1, reason, difference)
    return len(conv.replies), None


def _compare(reply: Reply, turn: Turn) -> Difference | None:
    if turn.final:
        if reply.calls:
            ids = [c.id for c in reply.calls]
            return Difference(reply.calls_path, "no tool calls (a text-only turn)", render(ids))
        want, got = _squash(turn.text), _squash(reply.text)
        if want != got:
            at = first_mismatch(want, got)
            return Difference(f"{reply.path}.content", around(want, at), around(got, at))
        return None
    for j, call in enumerate(turn.tool_calls):
        if j >= len(reply.calls):
            return Difference(
                f"{reply.calls_path}[{j}]",
                f'tool call "{call.id}" ({call.name})',
                "nothing (the call is missing)",
            )
        got_call = reply.calls[j]
        if got_call.id != call.id:
            return Difference(got_call.id_path, render(call.id), render(got_call.id))
        if got_call.name != call.name:
            return Difference(got_call.name_path, render(call.name), render(got_call.name))
    if len(reply.calls) > len(turn.tool_calls):
        extra = reply.calls[len(turn.tool_calls)]
        return Difference(
            f"{reply.calls_path}[{len(turn.tool_calls)}]",
            "nothing (no such call)",
            render(extra.id),
        )
    return None


def _missing_tool(conv: Conversation, turn: Turn) -> Divergence | None:
    for call in turn.tool_calls:
        if call.name not in conv.tools:
            return Divergence(
                turn.number,
                f"scripted turn {turn.number} calls {call.name!r}, which the request does not offer",
                Difference("tools", f'a tool named "{call.name}"', render(list(conv.tools))),
            )
    return None


_SPACE = re.compile(r"\s+")


def _squash(text: str) -> str:
    """Harnesses re-wrap and trim text they echo back; whitespace runs do not count."""
    return _SPACE.sub(" ", text).strip()
