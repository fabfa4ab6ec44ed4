"""opencode session exports (`opencode export <id>`), read from real exports (fixtures README):
what is opencode's own. test_readers.py holds it, with every reader, to the contract."""

from __future__ import annotations

from proxy.formats.harness_logs.opencode import READER, convert
from proxy.replay.trajectory import Trajectory
from tests.unit.formats.harness_logs import published
from tests.unit.formats.harness_logs.published import Change, put, raw, values

SESSION = "opencode/session.json"


def read(data: bytes, name: str = "session") -> Trajectory:
    return published.read(READER, data, name)


def edited(change: Change) -> bytes:
    return published.edited(READER, SESSION, change)


def test_a_session_of_two_exchanges_with_parallel_calls_reasoning_and_a_subagent() -> None:
    t = read(raw(SESSION))
    assert t.task == '"Set up the greeting files in this repository."'  # as opencode run sent it
    assert t.system is None  # opencode builds it per request; the export has none
    assert [len(turn.tool_calls) for turn in t.turns] == [2, 1, 1, 1, 0, 1, 0]
    assert [turn.round for turn in t.turns] == [1, 1, 1, 1, 1, 2, 2]
    assert [turn.index for turn in t.turns] == [1, 2, 3, 4, 5, 7, 8]  # opencode message indexes
    first = t.turns[0]
    assert [c.id for c in first.tool_calls] == ["call_oc_1", "call_oc_2"]  # one step: parallel
    assert first.tool_calls[0].arguments == '{"command":"ls","description":"list files"}'
    assert first.reasoning == "I should see what is in the repository before changing it."
    assert first.text == "Let me look around first."
    assert t.turns[1].tool_calls[0].name == "task"
    assert t.turns[4].final and t.turns[4].text == "All done."
    assert [u.content for u in t.turns[5].follow_up] == ['"Now write the answer to answer.txt."']
    assert t.tool_outputs["call_oc_2"] == "old value\n"
    assert t.tool_outputs["call_oc_4"].startswith("File not found: ")  # a failed call: its error
    [subagent] = t.skipped
    assert subagent.index == 2 and "ses_dbd9a7ffbffeSj5kZfjh7ur0uY" in subagent.reason


def test_the_messages_are_what_opencode_sent_the_model() -> None:
    [c] = convert(values(SESSION), "session.json")
    sent = values("opencode/session.sent.json")  # its last request, without the system prompt
    said = [{k: v for k, v in m.items() if k != "usage"} for m in c.messages]  # not sent back
    assert said[: len(sent)] == sent
    assert len(c.messages) == len(sent) + 1  # and the answer to that request


def test_the_subagent_session_names_its_parent() -> None:
    child = values("opencode/subagent.json")
    assert child["info"]["parentID"] == values(SESSION)["info"]["id"]


def test_a_failed_assistant_message_is_left_out_as_opencode_leaves_it_out() -> None:
    error = {"name": "APIError", "data": {"message": "boom"}}
    t = read(edited(put(("messages", 3, "info", "error"), error)))
    assert "call_oc_4" not in [c.id for turn in t.turns for c in turn.tool_calls]
    assert any(n.index == 3 and "APIError" in n.reason for n in t.skipped)


def test_an_unfinished_call_gets_what_opencode_sends_for_it() -> None:
    t = read(edited(put(("messages", 4, "parts", 3, "state", "status"), "running")))
    assert t.tool_outputs["call_oc_5"] == "[Tool execution was interrupted]"
