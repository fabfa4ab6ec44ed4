"""SWE-agent `.traj` and mini-swe-agent `.traj.json` files, read from real files (fixtures READMEs)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from proxy.errors import LoadError
from proxy.formats import read_with
from proxy.formats.harness_logs import mini_swe_agent, swe_agent
from proxy.formats.harness_logs.reader import Reader
from proxy.replay.trajectory import Trajectory
from tests.conftest import ROOT

LOGS = ROOT / "tests/fixtures/logs"
SWE = LOGS / "swe-agent"
MINI = LOGS / "mini-swe-agent"
MINI_FILES = ("toolcall", "textbased", "responses", "v1", "e2e-replay")


def doc(path: str) -> Any:
    return json.loads((LOGS / path).read_text())


def read(reader: Reader, document: Any, name: str = "run") -> Trajectory:
    [t] = read_with(reader, json.dumps(document).encode(), name=name, source=f"{name}.traj")
    return t


def calls(t: Trajectory) -> list[list[str]]:
    return [[c.id for c in turn.tool_calls] for turn in t.turns]


def notes(t: Trajectory) -> dict[int, str]:
    return {n.index: n.reason for n in t.skipped}


# -- SWE-agent ---------------------------------------------------------------------------------


def test_swe_agent_function_calling_keeps_the_recorded_ids() -> None:
    t = read(swe_agent.READER, doc("swe-agent/function-calling.traj"))
    assert t.format == "swe-agent"
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


def test_swe_agent_text_mode_leaves_the_demonstration_out_and_says_it_is_text_based() -> None:
    t = read(swe_agent.READER, doc("swe-agent/text-demo.traj"))
    assert t.task is not None and t.task.startswith("We're currently solving the following issue")
    assert calls(t) == [[]] * 5  # the action is a ``` block in the text
    assert [turn.index for turn in t.turns] == [3, 5, 7, 9, 11]
    assert t.text_based and [turn.exchange for turn in t.turns] == [1] * 5
    assert "```\nopen tests/missing_colon.py\n```" in t.turns[1].text
    assert [u.index for u in t.turns[1].follow_up] == [4]  # the observation of turn 1
    skipped = notes(t)
    assert set(skipped) == {1} and "demonstration" in skipped[1]


def test_swe_agent_parallel_calls_and_thinking_blocks() -> None:
    """SWE-agent asks for one call per step; a file with two still keeps both, in one turn."""
    traj = doc("swe-agent/function-calling.traj")
    history = traj["history"]
    second = copy.deepcopy(history[4]["tool_calls"][0])
    history[2]["tool_calls"].append(second)
    history[2]["thinking_blocks"] = [
        {"type": "thinking", "thinking": "Find it, then open it.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "..."},
    ]
    history.insert(4, {**history[5], "tool_call_ids": [second["id"]]})
    t = read(swe_agent.READER, traj)
    assert calls(t)[0] == ["call_fJuazlMUN5fQDQ73G6XSpYpx", "call_OhmPHGZp0XJ6JRnNkQaYcBMs"]
    assert t.turns[0].reasoning == "Find it, then open it."
    assert t.tool_outputs["call_OhmPHGZp0XJ6JRnNkQaYcBMs"].startswith("[File: ")


def test_swe_agent_retry_attempts_read_the_chosen_one() -> None:
    one = doc("swe-agent/function-calling.traj")
    other = copy.deepcopy(one)
    other["history"] = other["history"][:4]
    chosen = {**one, "attempts": [other, one], "info": {**one["info"], "best_attempt_idx": 1}}
    t = read(swe_agent.READER, chosen)
    assert len(t.turns) == 4
    assert [n.reason for n in t.skipped] == [
        "attempts[0]: another attempt of the retry agent (attempt 1 is read)"
    ]
    running = {"attempts": [one, other]}  # mid-run: no attempt chosen yet, the last one is read
    assert swe_agent.READER.miss(running) is None
    assert len(read(swe_agent.READER, running).turns) == 1


def test_swe_agent_messages_of_another_agent_are_left_out() -> None:
    traj = doc("swe-agent/function-calling.traj")
    traj["history"].insert(3, {"role": "user", "content": "review", "agent": "reviewer"})
    t = read(swe_agent.READER, traj)
    assert len(t.turns) == 4 and "agent 'reviewer'" in notes(t)[3]


@pytest.mark.parametrize(
    ("index", "change", "reason"),
    [
        (3, lambda m: m.pop("tool_call_ids"), "tool message has no tool_call_ids"),
        (2, lambda m: m["tool_calls"][0].pop("function"), "tool_calls[0] has no function object"),
        (2, lambda m: m.update(tool_calls="find_file"), "tool_calls must be a list"),
        (5, lambda m: m.pop("role"), "history item has no role"),
        (
            4,
            lambda m: m["tool_calls"][0]["function"].update(arguments="{oops"),
            "arguments is not valid JSON",
        ),
    ],
)
def test_swe_agent_a_broken_item_is_a_load_error_with_its_index(
    index: int, change: Any, reason: str
) -> None:
    traj = doc("swe-agent/function-calling.traj")
    change(traj["history"][index])
    with pytest.raises(LoadError) as caught:
        read(swe_agent.READER, traj)
    assert caught.value.index == index and reason in caught.value.reason


def test_swe_agent_miss() -> None:
    for name in ("function-calling.traj", "text-demo.traj"):
        assert swe_agent.READER.miss(doc(f"swe-agent/{name}")) is None
    chat = [{"role": "user", "content": "hi"}]
    cases: list[tuple[Any, str, int]] = [
        (chat, "not an object", 0),
        ({"messages": chat}, "$.history is missing", 0),
        (doc("mini-swe-agent/toolcall.traj.json"), "$.history is missing", 0),
        (doc("opencode/session.json"), "$.history is missing", 0),
        ({"trajectory": [], "environment": "main"}, "$.history is missing", 2),
        ({"history": chat}, "$.history[0] has no", 1),
    ]
    for document, where, closeness in cases:
        miss = swe_agent.READER.miss(document)
        assert miss is not None and where in miss.reason, document
        assert "SWE-agent trajectory" in miss.reason and miss.closeness == closeness


# -- mini-swe-agent ----------------------------------------------------------------------------


def test_mini_tool_calling_parallel_calls_reasoning_and_a_rejected_answer() -> None:
    t = read(mini_swe_agent.READER, doc("mini-swe-agent/toolcall.traj.json"))
    assert t.format == "mini-swe-agent"
    assert t.system == "You are a helpful assistant that can interact with a computer."
    assert t.task is not None and t.task.startswith(
        "Please solve this issue: Set up the greeting files in this repository."
    )
    assert calls(t) == [["call_mini_ls", "call_mini_cat"], ["call_mini_sed"], ["call_mini_done"]]
    assert [turn.index for turn in t.turns] == [2, 6, 8]
    assert t.turns[0].reasoning == (
        "Two independent reads: list the files and show existing.txt, in one step."
    )
    assert t.turns[0].tool_calls[1].arguments == '{"command": "cat existing.txt"}'
    assert t.tool_outputs["call_mini_cat"] == '{\n  "returncode": 0,\n  "output": "old value\\n"\n}'
    # the format error mini sent after the answer it rejected comes before the next turn
    [error] = t.turns[1].users_before
    assert error.index == 5 and isinstance(error.content, str)
    assert error.content.startswith("Tool call error:")
    skipped = notes(t)
    assert set(skipped) == {5, 10}
    assert "FormatError" in skipped[5] and "exit_status 'Submitted'" in skipped[10]


def test_mini_messages_lose_extra_and_keep_what_the_model_was_sent() -> None:
    [c] = mini_swe_agent.convert(doc("mini-swe-agent/toolcall.traj.json"), "toolcall.traj.json")
    allowed = {"role", "content", "tool_calls", "tool_call_id", "reasoning_content"}
    allowed |= {"usage", "created"}  # what the kept completion cost, and when (formats/chat.py)
    assert all(set(m) <= allowed for m in c.messages)
    assert c.indexes == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # the exit message (10) is left out
    assert c.messages[2]["tool_calls"][0] == {
        "function": {"arguments": '{"command": "ls -a"}', "name": "bash"},
        "id": "call_mini_ls",
        "type": "function",
    }


def test_mini_text_based_run_is_read_as_a_text_based_script() -> None:
    t = read(mini_swe_agent.READER, doc("mini-swe-agent/textbased.traj.json"))
    assert t.text_based and t.exchanges == 1
    assert calls(t) == [[], [], []]
    assert [turn.index for turn in t.turns] == [2, 5, 7]
    assert t.turns[0].reasoning == "Start by looking around."
    assert "```mswea_bash_command\nls -a\n```" in t.turns[0].text
    assert [u.index for u in t.turns[1].follow_up] == [3, 4]  # the output, then the format error
    skipped = notes(t)
    assert set(skipped) == {4, 8}
    assert "FormatError" in skipped[4] and "the end of the run" in skipped[8]


def test_mini_responses_model_reads_the_response_objects() -> None:
    t = read(mini_swe_agent.READER, doc("mini-swe-agent/responses.traj.json"))
    assert calls(t) == [["call_resp_ls", "call_resp_cat"], ["call_resp_sed"], ["call_resp_done"]]
    assert [turn.index for turn in t.turns] == [2, 5, 7]  # the response messages
    assert t.turns[0].reasoning == "List the files and read existing.txt together."
    assert t.turns[0].text == "Looking around."
    assert t.tool_outputs["call_resp_cat"].endswith('"output": "old value\\n"\n}')
    assert set(notes(t)) == {9}


def test_mini_1x_reasoning_comes_from_the_raw_response_and_the_end_is_left_out() -> None:
    t = read(mini_swe_agent.READER, doc("mini-swe-agent/v1.traj.json"))
    assert [turn.index for turn in t.turns] == [2, 4, 6, 8]  # 1.x keeps the rejected answer (4)
    assert t.turns[0].reasoning == "Start by listing the repository."
    assert "two at once" in t.turns[1].text
    assert t.text_based
    skipped = notes(t)
    assert "the end of the run" in skipped[9]  # the submission, recorded as a user message
    assert not [u for turn in t.turns for u in turn.follow_up if u.index == 9]


def test_mini_1x_run_that_crashed_keeps_its_last_message() -> None:
    run = doc("mini-swe-agent/v1.traj.json")
    run["info"].update(exit_status="RuntimeError", submission="boom")
    kept = notes(read(mini_swe_agent.READER, run))[9]  # read by the chat rules, not left out
    assert kept.startswith("the observation of the last turn")


def test_mini_run_replayed_by_the_proxy_gives_back_its_script() -> None:
    t = read(mini_swe_agent.READER, doc("mini-swe-agent/e2e-replay.traj.json"))
    assert calls(t) == [["call_rec_1"], ["call_rec_2"], ["call_rec_3"], ["call_live_end"]]
    assert [turn.text for turn in t.turns] == ["Step 1.", "Step 2.", "Step 3.", ""]


def test_mini_miss() -> None:
    for name in MINI_FILES:
        assert mini_swe_agent.READER.miss(doc(f"mini-swe-agent/{name}.traj.json")) is None, name
    early = doc("mini-swe-agent/v1.traj.json")
    del early["trajectory_format"]  # 1.x before the field, with exit_status and model_stats
    assert mini_swe_agent.READER.miss(early) is None
    chat = [{"role": "user", "content": "hi"}]
    cases: list[tuple[Any, str, int]] = [
        (chat, "not an object", 0),
        ({"messages": chat}, "$.trajectory_format is missing", 0),  # the generic shape's
        ({"trajectory_format": "other-1", "messages": chat}, "'other-1'", 1),
        ({"trajectory_format": "mini-swe-agent-1.1", "info": {}}, "$.messages is missing", 1),
        (doc("swe-agent/function-calling.traj"), "$.messages is missing", 0),
    ]
    for document, where, closeness in cases:
        miss = mini_swe_agent.READER.miss(document)
        assert miss is not None and where in miss.reason, document
        assert "mini-swe-agent trajectory" in miss.reason and miss.closeness == closeness


@pytest.mark.parametrize(
    ("name", "index", "value", "reason"),
    [
        ("toolcall", 3, "text", "message is not a JSON object"),
        ("toolcall", 4, {"content": "x"}, "message has no role"),
        (
            "toolcall",
            2,
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
            "tool_calls[0] has no function object",
        ),
        ("responses", 5, {"object": "response", "output": None}, "has no output list"),
        ("responses", 7, {"object": "response", "output": [{"type": "function_call"}]}, "no name"),
    ],
)
def test_mini_a_broken_message_is_a_load_error_with_its_index(
    name: str, index: int, value: Any, reason: str
) -> None:
    run = doc(f"mini-swe-agent/{name}.traj.json")
    run["messages"][index] = value
    with pytest.raises(LoadError) as caught:
        read(mini_swe_agent.READER, run)
    assert caught.value.index == index and reason in caught.value.reason
