"""SessionState: what the stores keep, written to JSON and read back whole, copied without shared
containers, bound to a script, and the cursors of a listing."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest

from proxy.store.state import BoundBy, SessionState, cursor_of, event_for, read_cursor


def busy() -> SessionState:
    """A state with every field away from its default, as a session that went live after a
    divergence, with faults and strict answers, looks."""
    return SessionState(
        id="ses_01",
        created=1_700_000_000.125,
        last_seen=1_700_000_042.5,
        script_name="greeting",
        script_digest="d" * 64,
        script_source="task",
        task_match=True,
        turns_total=3,
        replay_turns=2,
        turns_served=2,
        scripted_responses=3,
        live_since=1_700_000_040.0,
        live_reason="diverged",
        live_after_turn=2,
        divergence={"turn": 3, "path": "messages[4].content", "at": 1_700_000_040.0},
        divergences=1,
        volatile={"path": "messages[0].content", "at": 1_700_000_001.0},
        volatile_served=1,
        preset="opencode",
        upstream="http://gateway/sessions/ses_01/v1",
        usage_recorded=1,
        usage_estimated=2,
        forwarded={"main": 2, "toolless": 1},
        errors=1,
        results_returned=["call_greet_1", "call_greet_2"],
        observation={"call": "call_greet_1", "at": 1_700_000_010.0},
        observation_diffs=1,
        results_checked=3,
        children={"live-1": "a9aeb050a6110cc3d"},
        restore={"verdict": "restored", "handoff_turn": 3, "at": 2.0},
        restore_due=3,
        stops=1,
        prefix_messages=7,
        recorded_used=["abc:0", "abc:3"],
        faults=[{"turn": 2, "kind": "429", "times": 1}],
        faults_fired=[1],
        injected=[{"turn": 2, "kind": "429", "at": 1_700_000_020.0}],
        subagents=[
            {
                "child": "thread-child",
                "parent": "thread-root",
                "kind": "collab_spawn",
                "by": "x-openai-subagent",
                "requests": 2,
                "first_seen": 1_700_000_030.0,
                "last_seen": 1_700_000_031.0,
            }
        ],
    )


def test_no_field_is_left_at_its_default_in_the_busy_state() -> None:
    """So that the round trips below would notice any field lost."""
    fresh = SessionState(id="x", created=0.0, last_seen=0.0)
    state = busy()
    same = [
        f.name
        for f in dataclasses.fields(SessionState)
        if getattr(state, f.name) == getattr(fresh, f.name)
    ]
    assert same == []


def test_a_state_goes_through_json_and_back_unchanged() -> None:
    state = busy()
    back = SessionState.from_dict(orjson.loads(orjson.dumps(state.to_dict())))
    assert back == state
    assert back.created == 1_700_000_000.125  # a float stays exact


def test_a_copy_keeps_every_field() -> None:
    state = busy()
    copy = state.copy()
    for f in dataclasses.fields(SessionState):
        assert getattr(copy, f.name) == getattr(state, f.name), f.name


def test_a_copy_shares_none_of_the_containers_a_change_grows() -> None:
    state = busy()
    copy = state.copy()
    copy.forwarded["main"] += 1
    copy.results_returned.append("call_3")
    copy.recorded_used.append("abc:4")
    copy.faults_fired[0] += 1
    copy.injected.append({"turn": 3, "kind": "drop", "at": 0.0})
    copy.subagents[0]["requests"] += 1
    assert state == busy()


def test_a_state_from_a_dict_with_an_unknown_field_is_refused() -> None:
    data: dict[str, Any] = {**busy().to_dict(), "no_such_field": 1}
    with pytest.raises(TypeError):
        SessionState.from_dict(data)


def test_binding_sets_the_script_and_clears_what_a_live_session_had() -> None:
    state = busy()
    state.bind(
        name="other", digest="e" * 64, by=BoundBy.ADMIN, task_match=None, turns=5, replay_turns=None
    )
    assert (state.script_name, state.script_digest, state.script_source) == (
        "other",
        "e" * 64,
        "admin",
    )
    assert (state.turns_total, state.replay_turns, state.task_match) == (5, None, None)
    assert (state.live_since, state.live_reason, state.live_after_turn) == (None, None, None)
    assert state.divergence is None
    assert state.turns_served == 2 and state.divergences == 1  # counts are history: kept
    # what the replay of the old script showed is not the new one's: its cut, results, verdict
    assert (state.prefix_messages, state.observation, state.restore) == (None, None, None)
    assert (state.results_returned, state.results_checked, state.children) == ([], 0, {})
    assert state.recorded_used == []


@pytest.mark.parametrize(
    ("total", "branch", "planned"), [(3, None, 3), (3, 2, 2), (3, 0, 0), (3, 9, 3), (0, None, 0)]
)
def test_the_turns_planned_are_the_branch_point_within_the_script(
    total: int, branch: int | None, planned: int
) -> None:
    state = SessionState(id="s", created=0.0, last_seen=0.0, turns_total=total, replay_turns=branch)
    assert state.turns_planned == planned


def test_a_cursor_reads_back_to_the_creation_time_and_id() -> None:
    for state in (busy(), SessionState(id="a:b:c", created=0.1 + 0.2, last_seen=0.0)):
        assert read_cursor(cursor_of(state)) == (state.created, state.id)


@pytest.mark.parametrize("bad", ["", "12", "abc:s1", "nan:s1", "inf:s1", "-inf:s1", "1e309:s1"])
def test_a_cursor_this_store_did_not_make_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a cursor this store made"):
        read_cursor(bad)


def test_an_event_is_either_given_or_decided_by_the_changed_state() -> None:
    state = busy()
    given = {"session": "ses_01", "detail": "x"}
    assert event_for(given, state) is given
    assert event_for(lambda s: {"detail": f"served {s.turns_served}"}, state) == {
        "detail": "served 2"
    }
    assert event_for(lambda s: None, state) is None
    assert event_for(None, state) is None
