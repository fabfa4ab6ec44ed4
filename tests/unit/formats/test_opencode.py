"""opencode session exports (`opencode export <id>`), read from real exports (fixtures README)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from proxy.errors import LoadError
from proxy.formats import read_with
from proxy.formats.harness_logs.opencode import READER, convert
from proxy.replay.content import text_of
from proxy.replay.trajectory import Trajectory
from tests.conftest import ROOT

LOGS = ROOT / "tests/fixtures/logs"
HERE = LOGS / "opencode"


def doc(name: str) -> Any:
    return json.loads((HERE / name).read_text())


def read(document: Any, name: str = "session") -> Trajectory:
    [t] = read_with(READER, json.dumps(document).encode(), name=name, source=f"{name}.json")
    return t


def test_a_session_of_two_exchanges_with_parallel_calls_reasoning_and_a_subagent() -> None:
    t = read(doc("session.json"))
    assert t.format == "opencode"
    assert t.task == '"Set up the greeting files in this repository."'  # as opencode run sent it
    assert t.system is None  # opencode builds it per request; the export has none
    assert [len(turn.tool_calls) for turn in t.turns] == [2, 1, 1, 1, 0, 1, 0]
    assert [turn.exchange for turn in t.turns] == [1, 1, 1, 1, 1, 2, 2]
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
    [c] = convert(doc("session.json"), "session.json")
    sent = doc("session.sent.json")  # its last request, without the system prompt
    said = [{k: v for k, v in m.items() if k != "usage"} for m in c.messages]  # not sent back
    assert said[: len(sent)] == sent
    assert len(c.messages) == len(sent) + 1  # and the answer to that request


def test_the_subagent_session_is_a_session_of_its_own() -> None:
    child = doc("subagent.json")
    assert child["info"]["parentID"] == doc("session.json")["info"]["id"]
    t = read(child, "subagent")
    assert t.task == "Count the lines of existing.txt and report back."
    assert [[c.id for c in turn.tool_calls] for turn in t.turns] == [["call_sub_1"], []]
    assert t.turns[0].reasoning == "A quick count will do."


def test_the_export_of_a_replayed_e2e_run_gives_back_its_script() -> None:
    t = read(doc("e2e-replay.json"), "e2e")
    assert [[c.id for c in turn.tool_calls] for turn in t.turns] == [
        ["call_rec_1"],
        ["call_rec_2"],
        ["call_rec_3"],
        [],
    ]
    assert [turn.text for turn in t.turns] == ["Step 1.", "Step 2.", "Step 3.", "All done."]
    assert t.skipped == ()


def test_miss_is_none_for_every_export() -> None:
    for name in ("session.json", "subagent.json", "e2e-replay.json"):
        assert READER.miss(doc(name)) is None, name


@pytest.mark.parametrize(
    ("document", "where"),
    [
        ([{"role": "user", "content": "hi"}], "not an object"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "$.info"),
        (
            {"info": {"id": "ses_1"}, "messages": [{"role": "user", "content": "hi"}]},
            "$.messages[0]",
        ),
    ],
)
def test_miss_says_what_was_expected_and_where(document: Any, where: str) -> None:
    miss = READER.miss(document)
    assert miss is not None and where in miss.reason and "opencode session export" in miss.reason


def test_miss_for_openhands_files() -> None:
    v0 = json.loads((LOGS / "openhands/v0-basic_interactions.json").read_text())
    sdk = [
        json.loads(p.read_text())
        for p in sorted((LOGS / "openhands/sdk-conversation/events").glob("event-*.json"))
    ]
    for document in (v0, sdk):
        miss = READER.miss(document)
        assert miss is not None and miss.closeness == 0


def test_a_failed_assistant_message_is_left_out_as_opencode_leaves_it_out() -> None:
    session = copy.deepcopy(doc("session.json"))
    session["messages"][3]["info"]["error"] = {"name": "APIError", "data": {"message": "boom"}}
    t = read(session)
    assert "call_oc_4" not in [c.id for turn in t.turns for c in turn.tool_calls]
    assert any(n.index == 3 and "APIError" in n.reason for n in t.skipped)


def test_an_unfinished_call_gets_what_opencode_sends_for_it() -> None:
    session = copy.deepcopy(doc("session.json"))
    session["messages"][4]["parts"][3]["state"]["status"] = "running"
    assert read(session).tool_outputs["call_oc_5"] == "[Tool execution was interrupted]"


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        ((3, "parts", 1, "callID"), None, "parts[1].callID must be a string"),
        ((3, "parts", 1, "state", "input"), "oops", "parts[1].state.input must be an object"),
        ((2, "parts"), {}, "parts must be a list"),
        ((5, "info", "role"), "system", "info.role must be user or assistant"),
    ],
)
def test_a_broken_message_is_a_load_error_with_its_index(
    path: tuple[Any, ...], value: Any, reason: str
) -> None:
    session = copy.deepcopy(doc("session.json"))
    target = session["messages"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(LoadError) as caught:
        read(session)
    assert caught.value.index == path[0] and reason in caught.value.reason


def test_an_item_that_is_not_a_message() -> None:
    session = copy.deepcopy(doc("session.json"))
    session["messages"][6] = "text"
    with pytest.raises(LoadError) as caught:
        read(session)
    assert caught.value.index == 6


def test_tool_outputs_compare_with_what_the_harness_sends() -> None:
    """The recorded outputs are the ones opencode sent: observations compare like with like."""
    t = read(doc("session.json"))
    for message in doc("session.sent.json"):
        if message["role"] == "tool":
            assert t.tool_outputs[message["tool_call_id"]] == text_of(message["content"])
