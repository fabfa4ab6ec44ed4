"""`replay-proxy diff A B`: two trajectories or recordings, compared step by step, per lane.

A step is what one request got: for a recording, the request and the answer; for a plain
trajectory, the scripted turn with its recorded tool results. The first divergence of each lane is
reported in the strict-replay format (JSON path, then the text around the difference).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.apis.chat import read_answer
from proxy.replay.difference import first_difference
from proxy.replay.normalize import normalize
from proxy.replay.trajectory import Recorded, Trajectory

LANES = ("main", "toolless", "subagent", "other")


@dataclass(frozen=True, slots=True)
class Step:
    request: Any  # None for a plain trajectory's turn
    answer: Any


def steps(t: Trajectory) -> dict[str, list[Step]]:
    lanes: dict[str, list[Step]] = {lane: [] for lane in LANES}
    for turn in t.turns:
        answer = {
            "text": turn.text,
            "tool_calls": [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.tool_calls
            ],
            "results": [t.tool_outputs.get(c.id) for c in turn.tool_calls],
            "users_before": [u.content for u in turn.users_before],
        }
        lanes["main"].append(Step(turn.recorded.request if turn.recorded else None, answer))
    for r in t.side:
        lanes.setdefault(r.lane, []).append(Step(r.request, _answer(r)))
    return lanes


def _answer(r: Recorded) -> Any:
    if r.path.endswith("/chat/completions") and r.status == 200:
        return read_answer(r.body, stream=r.stream).message
    return {"status": r.status, "body": r.body.decode("utf-8", errors="replace")}


def diff(a: Trajectory, b: Trajectory, masks: Sequence[re.Pattern[str]] = ()) -> list[str]:
    """One report per lane that differs; empty when the two agree step for step."""
    reports: list[str] = []
    sa, sb = steps(a), steps(b)
    for lane in sorted(sa.keys() | sb.keys(), key=lambda name: (name not in LANES, name)):
        left, right = sa.get(lane, []), sb.get(lane, [])
        for k, (x, y) in enumerate(zip(left, right, strict=False), start=1):
            if x.request is not None and y.request is not None:
                d = first_difference(normalize(x.request, masks), normalize(y.request, masks))
                if d is not None:
                    reports.append(
                        _report(lane, k, "the request", d.path, d.expected, d.actual, a, b)
                    )
                    break
            d = first_difference(
                normalize(x.answer, masks, body=False), normalize(y.answer, masks, body=False)
            )
            if d is not None:
                reports.append(_report(lane, k, "the answer", d.path, d.expected, d.actual, a, b))
                break
        else:
            if len(left) != len(right):
                reports.append(
                    f"lane {lane}: {a.source} has {len(left)} steps, {b.source} has {len(right)}; "
                    f"they agree on the first {min(len(left), len(right))}"
                )
    return reports


def _report(
    lane: str, step: int, what: str, path: str, x: str, y: str, a: Trajectory, b: Trajectory
) -> str:
    return (
        f"lane {lane}, step {step}: {what} differs at {path or '$'}\n"
        f"  {a.source}: {x}\n  {b.source}: {y}"
    )
