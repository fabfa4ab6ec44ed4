"""Splice: put the recording's later user messages back into a session's live requests.

The harness never saw those messages (the proxy served the turns that answered them), so a live
request would lack them. Each goes right before the scripted assistant turn it preceded in the
recording (the turn is found by its tool-call ids, which the engine has already matched); the
trailing ones go after the last scripted turn's tool results. A message the request already holds
in that place is not inserted again. Only main-lane requests of the session are ever spliced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.replay.content import text_of
from proxy.replay.conversation import NO_ID
from proxy.replay.trajectory import UserMessage

if TYPE_CHECKING:
    from proxy.replay.conversation import Conversation, Reply
    from proxy.replay.trajectory import Trajectory


@dataclass(frozen=True, slots=True)
class Insertion:
    position: int  # insert before this index of the request's message list
    users: tuple[UserMessage, ...]


def plan_splice(
    conv: Conversation, replies: list[Reply], script: Trajectory, held: int
) -> tuple[Insertion, ...]:
    """Where the user messages go, for a request whose history holds `held` scripted turns
    (`replies`: the history's assistant replies, each held turn in one piece)."""
    plan: list[Insertion] = []
    for j in range(held):
        turn = script.turns[j]
        if turn.users_before:
            start = replies[j - 1].end if j > 0 else -1
            at = replies[j].position
            _add(plan, conv, at, turn.users_before, start, at)
    if held == len(script.turns) and held > 0 and script.trailing_users:
        last = replies[held - 1]
        ids = {conv.wire_id(c.id) for c in script.turns[-1].tool_calls}
        results = {
            r.position for r in conv.results if r.call_id in ids or r.call_id.startswith(NO_ID)
        }
        at = last.end + 1
        while at in results:
            at += 1
        end = replies[held].position if len(replies) > held else conv.message_count
        _add(plan, conv, at, script.trailing_users, last.end, end)
    return tuple(plan)


def _add(
    plan: list[Insertion],
    conv: Conversation,
    at: int,
    users: tuple[UserMessage, ...],
    start: int,
    end: int,
) -> None:
    present = {text for _, text in conv.users_between(start, end)}
    missing = tuple(u for u in users if text_of(u.content) not in present)
    if missing:
        plan.append(Insertion(at, missing))


def spliced(
    items: list[Any],
    plan: Sequence[Insertion],
    put: Callable[[list[Any], list[Insertion]], None],
) -> list[Any]:
    """`items` with the plan's insertions made in one pass, for every API: `put(out, group)` makes
    those of one position (in plan order) at the end of `out`, which holds the items before that
    position. Inserting them one by one, each a slice insertion, is quadratic in a long history.
    Positions are within the list (as plan_splice makes them: places in the history the client
    sent)."""
    groups: dict[int, list[Insertion]] = {}
    for insertion in plan:
        if not 0 <= insertion.position <= len(items):
            raise ValueError(f"splice position {insertion.position} outside {len(items)} items")
        groups.setdefault(insertion.position, []).append(insertion)
    out: list[Any] = []
    done = 0
    for position in sorted(groups):
        out.extend(items[done:position])
        put(out, groups[position])
        done = position
    out.extend(items[done:])
    return out


def apply_chat(messages: list[Any], plan: tuple[Insertion, ...]) -> list[Any]:
    """The Chat Completions splice: each user message goes in as it was recorded."""

    def put(out: list[Any], group: list[Insertion]) -> None:
        for insertion in reversed(group):  # of two at one place, the later one goes first
            out.extend({"role": "user", "content": u.content} for u in insertion.users)

    return spliced(messages, plan, put)
