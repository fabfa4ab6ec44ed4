"""OpenHands event lists: the SDK's event store and a V0 trajectory, from real files (fixtures
README): what is OpenHands' own. test_readers.py holds it, with every reader, to the contract."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from proxy.errors import LoadError
from proxy.formats import load_all
from proxy.formats.harness_logs.openhands import READER
from proxy.replay.content import text_of
from proxy.replay.trajectory import Trajectory
from tests.unit.formats.harness_logs import published
from tests.unit.formats.harness_logs.published import LOGS, values

CONVERSATION = LOGS / "openhands/sdk-conversation"


def sdk_events() -> list[Any]:
    """The event store as the loader hands it over: the event files in name order."""
    events: list[Any] = values("openhands/sdk-conversation")
    return events


def v0(name: str) -> Any:
    return values(f"openhands/v0-{name}.json")


def read(document: Any, name: str = "run") -> Trajectory:
    return published.read(READER, json.dumps(document).encode(), name)


def test_event_files_sort_by_name_in_event_order() -> None:
    names = sorted(p.name for p in (CONVERSATION / "events").glob("event-*.json"))
    assert [int(n.split("-")[1]) for n in names] == list(range(16))


def test_sdk_conversation_with_parallel_calls_reasoning_an_error_and_a_follow_up() -> None:
    t = read(sdk_events())
    assert t.task == "Set up the greeting files in this repository."
    assert t.system is not None and t.system.startswith("<SOUL>")
    calls = [[(c.id, c.name) for c in turn.tool_calls] for turn in t.turns]
    assert calls == [
        [("call_oh_1", "terminal"), ("call_oh_2", "file_editor")],  # one llm_response_id
        [("call_oh_3", "no_such_tool")],
        [("call_oh_4", "terminal")],
        [("call_oh_5", "finish")],
        [("call_oh_6", "terminal")],
        [],
    ]
    assert [turn.index for turn in t.turns] == [2, 6, 8, 10, 13, 15]  # event indexes
    assert t.turns[0].reasoning == "I should see what is in the repository before changing it."
    assert t.turns[0].text == "Let me look around first."
    assert t.turns[0].tool_calls[0].arguments == '{"command": "ls"}'
    assert t.tool_outputs["call_oh_3"].startswith("Tool 'no_such_tool' not found.")
    # the follow-up came after a finish call, not a text answer: it stays inside the exchange
    assert [u.content for u in t.turns[4].users_before] == ["Now write the answer to answer.txt."]
    assert t.turns[-1].final and t.turns[-1].text == "Written."
    assert t.skipped == ()


def test_sdk_system_prompt_is_what_the_harness_sent() -> None:
    """The last request the SDK made (captured by the fake model) opens with the system prompt the
    trajectory keeps (its tool outputs: test_readers.py)."""
    t = read(sdk_events())
    sent = json.loads((CONVERSATION / "last-request.json").read_text())
    assert text_of(sent[0]["content"]) == t.system


def test_sdk_bookkeeping_events_are_left_out_with_a_note() -> None:
    events = sdk_events()
    state = {"kind": "ConversationStateUpdateEvent", "source": "environment", "key": "x"}
    condensed = {"kind": "Condensation", "source": "agent", "forgotten_event_ids": []}
    t = read([*events[:2], state, *events[2:], condensed])
    assert [(n.index, n.reason.split(":")[0]) for n in t.skipped] == [
        (2, "ConversationStateUpdateEvent"),
        (len(events) + 1, "Condensation"),
    ]
    assert len(t.turns) == 6


def test_v0_trajectory_from_the_openhands_app() -> None:
    t = read(v0("basic_gui_mode"))
    assert t.task is not None and t.task.startswith("I want to create a VueJS app")
    assert [turn.index for turn in t.turns] == [7, 9, 11, 13, 15]
    assert [c.id for c in t.turns[0].tool_calls] == ["toolu_01W9Z8jBctr8X2frZV9p1RYs"]
    assert t.turns[0].tool_calls[0].name == "execute_bash"
    assert t.turns[-1].final  # the agent's MessageAction
    assert t.tool_outputs["toolu_01DwihWr4ooPZS1CGTLAWrFP"].startswith("Serving HTTP")
    notes = {n.index: n.reason for n in t.skipped}
    assert sorted(notes) == [0, 1, 2, 3, 5, 6, 16, 17]  # state changes and null observations
    assert notes[0].startswith("agent_state_changed")


def test_v0_conversation_of_several_user_messages_ends_with_the_finish_call() -> None:
    t = read(v0("basic_interactions"))
    assert t.task == "what's 1+1?"
    assert [turn.round for turn in t.turns] == [1, 2, 3]
    assert [c.name for c in t.turns[-1].tool_calls] == ["finish"]
    assert t.turns[-1].tool_calls[0].id == "call_IpyczPgEAwtpRWFZ2RNokTdH"


def test_v0_actions_of_one_model_response_are_one_turn() -> None:
    """Derived from the real file: its first two edits as one response with two calls (V0 gives
    every action of a response the whole response; no published file with parallel calls was
    found)."""
    events = copy.deepcopy(v0("basic_gui_mode"))
    first, second = events[9], events[11]
    response = first["tool_call_metadata"]["model_response"]
    message = response["choices"][0]["message"]
    other = second["tool_call_metadata"]["model_response"]["choices"][0]["message"]
    message["tool_calls"] = [*message["tool_calls"], *other["tool_calls"]]
    second["tool_call_metadata"]["model_response"] = response
    parallel = [*events[:10], events[11], events[10], *events[12:]]  # actions, then observations
    t = read(parallel)
    assert [len(turn.tool_calls) for turn in t.turns] == [1, 2, 1, 0]
    assert [c.id for c in t.turns[1].tool_calls] == [
        "toolu_01YYLXwwdBLwtMmjr5Sfsieg",
        "toolu_01GpJj2ShdFjb9ZTY4CVxi9C",
    ]


def test_v0_delegate_events_are_left_out() -> None:
    events = copy.deepcopy(v0("basic_gui_mode"))
    delegate = copy.deepcopy(events[7])
    delegate["action"] = "delegate"
    answer = copy.deepcopy(events[8])
    answer["observation"] = "delegate"
    inner = copy.deepcopy(events[9])  # the delegate's own call
    t = read([*events[:7], delegate, inner, answer, *events[9:]])
    assert [turn.index for turn in t.turns] == [7, 10, 12, 14, 16]
    assert any(n.index == 8 and "delegate agent" in n.reason for n in t.skipped)
    assert t.tool_outputs["toolu_01W9Z8jBctr8X2frZV9p1RYs"] == ""  # the delegate's answer


def test_an_event_store_never_reads_a_link_that_leads_out_of_it(tmp_path: Path) -> None:
    store = tmp_path / "conv"
    shutil.copytree(CONVERSATION, store)
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps({"kind": "MessageEvent", "secret": "not for the proxy"}))
    events = sorted((store / "events").glob("event-*.json"))
    kept = events[3].rename(store / "event-3.kept")
    events[3].symlink_to(secret)
    with pytest.raises(LoadError) as caught:
        load_all(store)
    assert caught.value.index == 3 and "leads out of the event store" in caught.value.reason
    assert "not for the proxy" not in str(caught.value)
    events[3].unlink()
    events[3].symlink_to(kept)  # a link within the store is read as the file it names
    assert load_all(store)[0].turns
