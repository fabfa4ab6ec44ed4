"""`replay-proxy diff A B`: two trajectories or recordings, compared step by step, per lane.

A step is what one request got: for a recording, the request and the answer; for a plain
trajectory, the scripted turn with its recorded tool results. Both sides are normalised as strict
replay does: the run's masks, and the harness preset (each side's own values: its working
directory, its date). Each difference gets a verdict: a volatile one (only values that change
between runs differ) is reported and the lane goes on; the first changed one ends the lane.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.apis import FIELDS
from proxy.apis.chat import read_answer
from proxy.replay.conversation import Lane
from proxy.replay.difference import Difference, first_difference
from proxy.replay.normalize import normalize
from proxy.replay.presets import PRESET_BY_NAME, Preset, recognise
from proxy.replay.trajectory import Recorded, Trajectory
from proxy.replay.volatile import CHANGED_VERDICT, VOLATILE, Verdict, judge

LANES = tuple(lane.value for lane in Lane)


@dataclass(frozen=True, slots=True)
class Step:
    request: Any  # None for a plain trajectory's turn
    answer: Any


@dataclass(frozen=True, slots=True)
class Finding:
    """One difference between the two runs: where, what, and its verdict."""

    lane: str
    step: int  # 0 for a different number of steps
    what: str  # "the request" | "the answer" | "the number of steps"
    difference: Difference
    verdict: Verdict = CHANGED_VERDICT

    @property
    def volatile(self) -> bool:
        return self.verdict.verdict == VOLATILE

    def report(self, a: str, b: str) -> str:
        d = self.difference
        if self.step == 0:
            return f"lane {self.lane}: {a} has {d.expected} steps, {b} has {d.actual}; [changed]"
        head = f"lane {self.lane}, step {self.step}: {self.what} differs at {d.path or '$'}"
        if self.volatile:
            verdict = f"volatile ({self.verdict.flags()} would cover it)"
        else:
            verdict = "changed"
        return f"{head}\n  {a}: {d.expected}\n  {b}: {d.actual}\n  verdict: {verdict}"


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
        lanes[Lane.MAIN].append(Step(turn.recorded.request if turn.recorded else None, answer))
    for r in t.side:
        lanes.setdefault(r.lane, []).append(Step(r.request, _answer(r)))
    return lanes


def preset_of(t: Trajectory) -> Preset | None:
    """The preset a recording names, else the one its first request is recognised by."""
    recorded: list[Recorded] = [u.recorded for u in t.turns if u.recorded is not None]
    recorded.extend(t.side)
    for r in recorded:
        if r.preset is not None and r.preset in PRESET_BY_NAME:
            return PRESET_BY_NAME[r.preset]
    return recognise(recorded[0].request) if recorded else None


def _answer(r: Recorded) -> Any:
    if r.path.endswith("/chat/completions") and r.status == 200:
        return read_answer(r.body, stream=r.stream).message
    return {"status": r.status, "body": r.body.decode("utf-8", errors="replace")}


def compared(
    a: Trajectory, b: Trajectory, masks: Sequence[re.Pattern[str]] = (), *, presets: bool = True
) -> Iterator[tuple[str, int, str, Any, Any]]:
    """(lane, step, what, a's normal form, b's) for each part of each step, in order; then
    (lane, 0, "the number of steps", count, count) for a lane whose step counts differ."""
    pa, pb = (preset_of(a), preset_of(b)) if presets else (None, None)
    preset = pa or pb
    sa, sb = steps(a), steps(b)
    for lane in sorted(sa.keys() | sb.keys(), key=lambda name: (name not in LANES, name)):
        left, right = sa.get(lane, []), sb.get(lane, [])
        for k, (x, y) in enumerate(zip(left, right, strict=False), start=1):
            mx, my = _masks(x, preset, masks), _masks(y, preset, masks)
            if x.request is not None and y.request is not None:
                canonical = preset.canonical if preset is not None and preset.orders else None
                yield (
                    lane,
                    k,
                    "the request",
                    normalize(x.request, mx, canonical=canonical, fields=FIELDS),
                    normalize(y.request, my, canonical=canonical, fields=FIELDS),
                )
            yield (
                lane,
                k,
                "the answer",
                normalize(x.answer, mx, body=False, fields=FIELDS),
                normalize(y.answer, my, body=False, fields=FIELDS),
            )
        if len(left) != len(right):
            yield lane, 0, "the number of steps", len(left), len(right)


def _masks(
    step: Step, preset: Preset | None, masks: Sequence[re.Pattern[str]]
) -> tuple[re.Pattern[str], ...]:
    if preset is None or step.request is None:
        return tuple(masks)
    return (*preset.patterns(step.request), *masks)


def diff(
    a: Trajectory, b: Trajectory, masks: Sequence[re.Pattern[str]] = (), *, presets: bool = True
) -> list[Finding]:
    """Every volatile difference of each lane up to its first changed one; empty when the two
    agree step for step."""
    findings: list[Finding] = []
    ended: set[str] = set()
    preset = (preset_of(a) or preset_of(b)) if presets else None  # the verdicts' own masks
    for lane, step, what, x, y in compared(a, b, masks, presets=presets):
        if lane in ended:
            continue
        if step == 0:
            findings.append(Finding(lane, 0, what, Difference("", str(x), str(y))))
            continue
        difference = first_difference(x, y)
        if difference is None:
            continue
        verdict = judge(x, y, preset=preset)
        if verdict.changed_at is not None:
            difference = verdict.changed_at
        findings.append(Finding(lane, step, what, difference, verdict))
        if verdict.verdict != VOLATILE:
            ended.add(lane)
    return findings
