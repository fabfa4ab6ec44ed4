"""`replay-proxy diff` on two plain trajectories, step by step: equal runs agree, a volatile
difference is reported and the lane goes on, the first changed one ends the lane, and a different
number of steps is a finding of its own."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from proxy.formats import load_bytes
from proxy.recording.diff import diff, steps
from proxy.replay.trajectory import Trajectory

GREETING = Path(__file__).parents[3] / "examples" / "greeting.json"
RECORDED: list[dict[str, Any]] = json.loads(GREETING.read_text())


def load(messages: list[dict[str, Any]], name: str = "run") -> Trajectory:
    return load_bytes(json.dumps(messages).encode(), name=name, filename=f"{name}.json")


def changed(edit: Any) -> Trajectory:
    messages = copy.deepcopy(RECORDED)
    edit(messages)
    return load(messages, "b")


def tool_result(messages: list[dict[str, Any]], call: str) -> dict[str, Any]:
    return next(m for m in messages if m.get("tool_call_id") == call)


def test_a_plain_trajectorys_steps_are_its_turns_with_their_results() -> None:
    lanes = steps(load(RECORDED))
    assert [len(lanes[lane]) for lane in ("main", "toolless", "subagent")] == [3, 0, 0]
    first = lanes["main"][0]
    assert first.request is None  # a plain trajectory has no recorded request
    assert [c["id"] for c in first.answer["tool_calls"]] == ["call_greet_1"]
    assert lanes["main"][1].answer["results"] == ['print("hello, world")\n']


def test_a_run_agrees_with_itself() -> None:
    assert diff(load(RECORDED), load(RECORDED, "again")) == []


def test_a_changed_tool_call_ends_the_lane_at_its_step() -> None:
    def edit(messages: list[dict[str, Any]]) -> None:
        messages[4]["tool_calls"][0]["function"]["arguments"] = '{"command": "rm -rf /"}'
        tool_result(messages, "call_greet_3")["content"] = "something else"  # later: not reported

    [finding] = diff(load(RECORDED), changed(edit))
    assert (finding.lane, finding.step, finding.what, finding.volatile) == (
        "main",
        2,
        "the answer",
        False,
    )
    assert "tool_calls" in finding.difference.path
    text = finding.report("a.json", "b.json")
    assert text.startswith("lane main, step 2: the answer differs at")
    assert text.endswith("verdict: changed")


def test_a_volatile_difference_is_reported_and_the_lane_goes_on() -> None:
    def timestamps(stamp: str) -> Any:
        def edit(messages: list[dict[str, Any]]) -> None:
            tool_result(messages, "call_greet_1")["content"] = f"created at {stamp}"

        return edit

    a = changed(timestamps("2026-01-01T10:00:00Z"))
    b = changed(timestamps("2026-03-05T11:22:33Z"))

    def and_a_change(messages: list[dict[str, Any]]) -> None:
        timestamps("2026-03-05T11:22:33Z")(messages)
        tool_result(messages, "call_greet_3")["content"] = "hello, mars\n"

    findings = diff(a, b)
    assert [(f.step, f.volatile) for f in findings] == [(1, True)]
    assert "volatile (--mask" in findings[0].report("a", "b")
    assert [(f.step, f.volatile) for f in diff(a, changed(and_a_change))] == [
        (1, True),
        (3, False),
    ]


def test_a_mask_makes_a_difference_not_count() -> None:
    def edit(messages: list[dict[str, Any]]) -> None:
        tool_result(messages, "call_greet_2")["content"] = 'print("hello, there")\n'

    assert diff(load(RECORDED), changed(edit), [re.compile(r"hello, \w+")]) == []
    assert len(diff(load(RECORDED), changed(edit))) == 1


def test_a_different_number_of_steps_is_a_finding_of_its_own() -> None:
    shorter = load(RECORDED[: RECORDED.index(tool_result(RECORDED, "call_greet_2")) + 1], "b")
    [finding] = diff(load(RECORDED), shorter)
    assert (finding.lane, finding.step, finding.what) == ("main", 0, "the number of steps")
    assert finding.report("a", "b") == "lane main: a has 3 steps, b has 2; [changed]"
