"""mini-swe-agent `.traj.json` files, read from real files (fixtures README): what is
mini-swe-agent's own. test_readers.py holds it, with every reader, to the contract."""

from __future__ import annotations

from typing import Any

from proxy.formats.harness_logs.mini_swe_agent import READER, convert
from proxy.replay.trajectory import Trajectory
from tests.unit.formats.harness_logs import published
from tests.unit.formats.harness_logs.published import calls, notes, values


def read(document: Any, name: str = "run") -> Trajectory:
    return published.read(READER, published.encoded(READER, document), name)


def test_tool_calling_parallel_calls_reasoning_and_a_rejected_answer() -> None:
    t = read(values("mini-swe-agent/toolcall.traj.json"))
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


def test_messages_lose_extra_and_keep_what_the_model_was_sent() -> None:
    [c] = convert(values("mini-swe-agent/toolcall.traj.json"), "toolcall.traj.json")
    allowed = {"role", "content", "tool_calls", "tool_call_id", "reasoning_content"}
    allowed |= {"usage", "created"}  # what the kept completion cost, and when (formats/chat.py)
    assert all(set(m) <= allowed for m in c.messages)
    assert c.indexes == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # the exit message (10) is left out
    assert c.messages[2]["tool_calls"][0] == {
        "function": {"arguments": '{"command": "ls -a"}', "name": "bash"},
        "id": "call_mini_ls",
        "type": "function",
    }


def test_text_based_run_is_read_as_a_text_based_script() -> None:
    t = read(values("mini-swe-agent/textbased.traj.json"))
    assert t.text_based and t.rounds == 1
    assert calls(t) == [[], [], []]
    assert [turn.index for turn in t.turns] == [2, 5, 7]
    assert t.turns[0].reasoning == "Start by looking around."
    assert "```mswea_bash_command\nls -a\n```" in t.turns[0].text
    assert [u.index for u in t.turns[1].follow_up] == [3, 4]  # the output, then the format error
    skipped = notes(t)
    assert set(skipped) == {4, 8}
    assert "FormatError" in skipped[4] and "the end of the run" in skipped[8]


def test_responses_model_reads_the_response_objects() -> None:
    t = read(values("mini-swe-agent/responses.traj.json"))
    assert calls(t) == [["call_resp_ls", "call_resp_cat"], ["call_resp_sed"], ["call_resp_done"]]
    assert [turn.index for turn in t.turns] == [2, 5, 7]  # the response messages
    assert t.turns[0].reasoning == "List the files and read existing.txt together."
    assert t.turns[0].text == "Looking around."
    assert t.tool_outputs["call_resp_cat"].endswith('"output": "old value\\n"\n}')
    assert set(notes(t)) == {9}


def test_1x_reasoning_comes_from_the_raw_response_and_the_end_is_left_out() -> None:
    t = read(values("mini-swe-agent/v1.traj.json"))
    assert [turn.index for turn in t.turns] == [2, 4, 6, 8]  # 1.x keeps the rejected answer (4)
    assert t.turns[0].reasoning == "Start by listing the repository."
    assert "two at once" in t.turns[1].text
    assert t.text_based
    skipped = notes(t)
    assert "the end of the run" in skipped[9]  # the submission, recorded as a user message
    assert not [u for turn in t.turns for u in turn.follow_up if u.index == 9]


def test_1x_run_that_crashed_keeps_its_last_message() -> None:
    run = values("mini-swe-agent/v1.traj.json")
    run["info"].update(exit_status="RuntimeError", submission="boom")
    kept = notes(read(run))[9]  # read by the chat rules, not left out
    assert kept.startswith("the observation of the last turn")


def test_a_1x_file_from_before_trajectory_format_is_of_the_format() -> None:
    early = values("mini-swe-agent/v1.traj.json")
    del early["trajectory_format"]  # 1.x before the field, with exit_status and model_stats
    assert READER.miss(early) is None


def test_1x_through_openrouter_reads_the_reasoning_openrouter_returned() -> None:
    # OpenRouterModel keeps OpenRouter's raw answer: its reasoning is in message.reasoning there
    t = read(values("mini-swe-agent/v1-openrouter.traj.json"))
    assert [turn.index for turn in t.turns] == [2, 4, 6]
    assert [turn.reasoning for turn in t.turns] == [
        "The task mentions greeting files; list the repository before touching anything.",
        "existing.txt holds the old value: replace it in place and create created.txt.",
        None,  # the last call returned no reasoning
    ]
    # reasoning is the turn's own, never part of the text a harness is served
    assert t.turns[0].text == "THOUGHT: look at the files first.\n\n```bash\nls -a\n```"
    assert all("greeting files;" not in turn.text for turn in t.turns)
    assert "the end of the run" in notes(t)[7]
