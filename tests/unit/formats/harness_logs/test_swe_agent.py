"""SWE-agent `.traj` files, read from real files (fixtures README): what is SWE-agent's own.
test_readers.py holds it, with every reader, to the contract."""

from __future__ import annotations

import copy
from typing import Any

from proxy.formats.harness_logs.swe_agent import READER
from proxy.replay.trajectory import Trajectory
from tests.unit.formats.harness_logs import published
from tests.unit.formats.harness_logs.published import calls, notes, values


def read(document: Any, name: str = "run") -> Trajectory:
    return published.read(READER, published.encoded(READER, document), name)


def test_function_calling_keeps_the_recorded_ids() -> None:
    t = read(values("swe-agent/function-calling.traj"))
    assert t.system is not None and t.system.startswith("SETTING: You are an autonomous programmer")
    assert t.task is not None and "SyntaxError: invalid syntax" in t.task
    assert calls(t) == [
        ["call_fJuazlMUN5fQDQ73G6XSpYpx"],
        ["call_OhmPHGZp0XJ6JRnNkQaYcBMs"],
        ["call_DVnbJcFrvwPsrPt3KfIMf7OH"],
        ["call_dcF76aXH6e1pzqRwGxOwpuxb"],
    ]
    assert [turn.index for turn in t.turns] == [2, 4, 6, 8]  # positions in history
    assert t.turns[0].tool_calls[0].name == "find_file"
    assert t.turns[0].tool_calls[0].arguments == '{"file_name":"missing_colon.py"}'
    assert t.turns[0].text.startswith("To start addressing this issue")
    assert t.tool_outputs["call_dcF76aXH6e1pzqRwGxOwpuxb"].startswith("8.2\n")
    assert t.skipped == () and t.dropped == ()


def test_text_mode_leaves_the_demonstration_out_and_says_it_is_text_based() -> None:
    t = read(values("swe-agent/text-demo.traj"))
    assert t.task is not None and t.task.startswith("We're currently solving the following issue")
    assert calls(t) == [[]] * 5  # the action is a ``` block in the text
    assert [turn.index for turn in t.turns] == [3, 5, 7, 9, 11]
    assert t.text_based and [turn.round for turn in t.turns] == [1] * 5
    assert "```\nopen tests/missing_colon.py\n```" in t.turns[1].text
    assert [u.index for u in t.turns[1].follow_up] == [4]  # the observation of turn 1
    skipped = notes(t)
    assert set(skipped) == {1} and "demonstration" in skipped[1]


def test_parallel_calls_and_thinking_blocks() -> None:
    """SWE-agent asks for one call per step; a file with two still keeps both, in one turn."""
    traj = values("swe-agent/function-calling.traj")
    history = traj["history"]
    second = copy.deepcopy(history[4]["tool_calls"][0])
    history[2]["tool_calls"].append(second)
    history[2]["thinking_blocks"] = [
        {"type": "thinking", "thinking": "Find it, then open it.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "..."},
    ]
    history.insert(4, {**history[5], "tool_call_ids": [second["id"]]})
    t = read(traj)
    assert calls(t)[0] == ["call_fJuazlMUN5fQDQ73G6XSpYpx", "call_OhmPHGZp0XJ6JRnNkQaYcBMs"]
    assert t.turns[0].reasoning == "Find it, then open it."
    assert t.tool_outputs["call_OhmPHGZp0XJ6JRnNkQaYcBMs"].startswith("[File: ")


def test_retry_attempts_read_the_chosen_one() -> None:
    one = values("swe-agent/function-calling.traj")
    other = copy.deepcopy(one)
    other["history"] = other["history"][:4]
    chosen = {**one, "attempts": [other, one], "info": {**one["info"], "best_attempt_idx": 1}}
    t = read(chosen)
    assert len(t.turns) == 4
    assert [n.reason for n in t.skipped] == [
        "attempts[0]: another attempt of the retry agent (attempt 1 is read)"
    ]
    running = {"attempts": [one, other]}  # mid-run: no attempt chosen yet, the last one is read
    assert READER.miss(running) is None
    assert len(read(running).turns) == 1


def test_messages_of_another_agent_are_left_out() -> None:
    traj = values("swe-agent/function-calling.traj")
    traj["history"].insert(3, {"role": "user", "content": "review", "agent": "reviewer"})
    t = read(traj)
    assert len(t.turns) == 4 and "agent 'reviewer'" in notes(t)[3]
