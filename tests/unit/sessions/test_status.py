"""A session's status report: its phase, the scripted calls whose results came back, whether the
replay is complete, and its faults, from the state alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.formats import load_file
from proxy.replay.faults import Fault, Kind
from proxy.replay.trajectory import Trajectory
from proxy.sessions.status import faults, iso, phase, report
from proxy.store.state import BoundBy, SessionState

GREETING = Path(__file__).parents[3] / "examples" / "greeting.json"
CALLS = ["call_greet_1", "call_greet_2", "call_greet_3"]


def greeting() -> Trajectory:
    return load_file(GREETING)


def bound(t: Trajectory, *, replay_turns: int | None = None, **fields: Any) -> SessionState:
    state = SessionState(id="ses_1", created=1_767_225_600.0, last_seen=1_767_225_601.5)
    state.bind(
        name=t.name,
        digest=t.digest,
        by=BoundBy.UNCLAIMED,
        task_match=True,
        turns=len(t.turns),
        replay_turns=replay_turns,
    )
    for name, value in fields.items():
        setattr(state, name, value)
    return state


def test_times_are_utc_iso_with_milliseconds() -> None:
    assert iso(1_767_225_600.0) == "2026-01-01T00:00:00.000Z"
    assert iso(1_767_225_601.2345) == "2026-01-01T00:00:01.234Z"
    assert iso(None) is None


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "replaying"),
        ({"turns_served": 3}, "served"),
        ({"turns_served": 3, "stops": 1}, "stopped"),
        ({"divergence": {"turn": 2}}, "diverged"),
        ({"divergence": {"turn": 2}, "live_since": 5.0}, "live"),  # live wins
        ({"turns_served": 3, "live_since": 5.0}, "live"),
    ],
)
def test_the_phase_of_a_bound_session(fields: dict[str, Any], expected: str) -> None:
    assert phase(bound(greeting(), **fields)) == expected


def test_a_session_without_a_script_is_unscripted() -> None:
    state = SessionState(id="s", created=0.0, last_seen=0.0, live_since=1.0)
    assert phase(state) == "unscripted"
    assert report(state, None)["script"] is None


def test_a_branch_is_served_once_its_k_turns_are() -> None:
    assert phase(bound(greeting(), replay_turns=2, turns_served=2)) == "served"


def test_each_scripted_call_says_whether_its_result_came_back() -> None:
    t = greeting()
    r = report(bound(t, turns_served=2, results_returned=CALLS[:1]), t)
    assert r["tool_results"]["expected"] == 3 and r["tool_results"]["returned"] == 1
    assert [(c["turn"], c["id"], c["result_returned"]) for c in r["tool_results"]["calls"]] == [
        (1, "call_greet_1", True),
        (2, "call_greet_2", False),
        (3, "call_greet_3", False),
    ]
    assert r["complete"] is False
    assert r["script"]["name"] == "greeting" and r["script"]["tool_calls"] == 3


def test_complete_needs_every_turn_served_and_every_result_back() -> None:
    t = greeting()
    assert report(bound(t, turns_served=3, results_returned=CALLS), t)["complete"] is True
    # a result of an earlier turn missing; the last turn's are not due when nothing came after it
    assert (
        report(bound(t, turns_served=3, results_returned=[CALLS[0], CALLS[2]]), t)["complete"]
        is False
    )
    assert report(bound(t, turns_served=3, results_returned=CALLS), None)["complete"] is False


def test_a_branch_expects_only_the_calls_of_its_first_k_turns() -> None:
    t = greeting()
    r = report(bound(t, replay_turns=1, turns_served=1, results_returned=CALLS[:1]), t)
    assert [c["id"] for c in r["tool_results"]["calls"]] == ["call_greet_1"]
    assert (r["turns_planned"], r["complete"]) == (1, True)


def test_a_script_that_cannot_be_read_is_reported_with_what_is_known() -> None:
    state = bound(greeting(), turns_served=1)
    r = report(state, None, script_error="its script has changed")
    assert r["script"]["error"] == "its script has changed"
    assert r["script"]["tool_calls"] is None and r["tool_results"]["calls"] == []
    assert r["turns_served"] == 1 and r["phase"] == "replaying"


def test_every_lane_is_reported_even_with_nothing_forwarded() -> None:
    r = report(bound(greeting(), forwarded={"toolless": 2}), greeting())
    assert r["forwarded"] == {"main": 0, "toolless": 2, "subagent": 0}


def test_recorded_times_are_written_as_iso() -> None:
    state = bound(greeting(), live_since=1_767_225_600.5, divergence={"turn": 2, "at": 0.0})
    r = report(state, greeting())
    assert r["live_since"] == "2026-01-01T00:00:00.500Z"
    assert r["divergence"] == {"turn": 2, "at": "1970-01-01T00:00:00.000Z"}
    assert (r["created"], r["last_seen"]) == (
        "2026-01-01T00:00:00.000Z",
        "2026-01-01T00:00:01.500Z",
    )


def test_faults_report_the_plan_with_how_often_each_fired() -> None:
    plan = (Fault(turn=2, kind=Kind.RATE_LIMITED, times=2), Fault(turn=3, kind=Kind.DROP))
    state = bound(
        greeting(), faults_fired=[2], injected=[{"turn": 2, "kind": "429", "at": 1_767_225_600.0}]
    )
    f = faults(state, plan)
    assert f["set_by"] == "flag"
    assert [(p["turn"], p["kind"], p["fired"]) for p in f["plan"]] == [
        (2, "429", 2),
        (3, "drop", 0),
    ]
    assert f["injected"] == [{"turn": 2, "kind": "429", "at": "2026-01-01T00:00:00.000Z"}]
    state.faults = [p.model_dump(mode="json") for p in plan]
    assert faults(state, plan)["set_by"] == "admin"
