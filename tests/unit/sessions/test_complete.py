"""`complete`: every planned turn served and every result that was due came back. The results of
the script's last turn are not due only when nothing could come after them: the session replays
the whole script, and no request came after that turn (the harness ended its run with them, as
mini-swe-agent's submit command and OpenHands' finish tool do). Everything else a run leaves out
is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.formats import load_file
from proxy.replay.trajectory import Trajectory
from proxy.sessions.status import report
from proxy.store.state import SessionState
from tests.unit.sessions.test_status import bound

EXAMPLES = Path(__file__).parents[3] / "examples"
# four turns, each one bash call; the fourth is the submit command, with no recorded result
ENDS_ITSELF = EXAMPLES / "harnesses" / "mini-swe-agent.json"
FIRST_THREE = ["call_greet_1", "call_greet_2", "call_greet_3"]
SUBMIT = "call_greet_4"


def ends_itself() -> Trajectory:
    t = load_file(ENDS_ITSELF)
    assert [c.id for turn in t.turns for c in turn.tool_calls] == [*FIRST_THREE, SUBMIT]
    return t


def test_a_run_that_ends_with_its_last_call_as_recorded_is_complete() -> None:
    t = ends_itself()
    r = report(bound(t, turns_served=4, results_returned=FIRST_THREE), t)
    assert r["complete"] is True and r["incomplete"] == []
    assert r["tool_results"]["not_due"] == [SUBMIT] and r["tool_results"]["missing"] == []
    assert r["tool_results"]["returned"] == 3 and r["tool_results"]["expected"] == 4


@pytest.mark.parametrize(
    "after",
    [
        {"stops": 1},  # --after-script stop answered the request that came after it
        {"live_since": 1_767_225_601.0},  # it went live: the request that came after it
        {"divergence": {"turn": 5, "kind": "beyond"}},  # strict: a step past the recording
    ],
)
def test_a_request_after_the_last_turn_owes_its_results(after: dict[str, Any]) -> None:
    t = ends_itself()
    r = report(bound(t, turns_served=4, results_returned=FIRST_THREE, **after), t)
    assert r["complete"] is False and r["tool_results"]["missing"] == [SUBMIT]
    assert r["incomplete"] == [f"1 tool result never came back: {SUBMIT} (turn 4, bash)"]
    assert r["tool_results"]["not_due"] == []


def test_the_last_turn_of_a_branch_owes_its_results() -> None:
    """The recorded run went on after turn K: a harness that stops there is not the same run."""
    t = ends_itself()
    r = report(bound(t, replay_turns=3, turns_served=3, results_returned=FIRST_THREE[:2]), t)
    assert r["complete"] is False and r["tool_results"]["missing"] == ["call_greet_3"]


def test_a_result_the_script_records_for_the_last_call_does_not_make_it_due() -> None:
    """A harness's own log records the output of its way out (mini-swe-agent's submit command),
    which the harness never sends; examples/greeting.json records its last call's output too."""
    t = load_file(EXAMPLES / "greeting.json")
    assert "call_greet_3" in t.tool_outputs
    r = report(bound(t, turns_served=3, results_returned=FIRST_THREE[:2]), t)
    assert r["complete"] is True and r["tool_results"]["not_due"] == ["call_greet_3"]
    stopped = bound(t, turns_served=3, results_returned=FIRST_THREE[:2], stops=1)
    assert report(stopped, t)["tool_results"]["missing"] == ["call_greet_3"]


def test_a_result_of_an_earlier_turn_never_returned_is_named() -> None:
    t = ends_itself()
    r = report(bound(t, turns_served=4, results_returned=["call_greet_1", "call_greet_3"]), t)
    assert r["complete"] is False and r["tool_results"]["missing"] == ["call_greet_2"]
    assert r["incomplete"] == ["1 tool result never came back: call_greet_2 (turn 2, bash)"]


def test_turns_not_served_are_named_and_their_calls_are_not_counted_twice() -> None:
    t = ends_itself()
    r = report(bound(t, turns_served=2, results_returned=FIRST_THREE[:1]), t)
    assert r["complete"] is False
    assert r["incomplete"] == [
        "turns 3 to 4 of 4 not served",
        "1 tool result never came back: call_greet_2 (turn 2, bash)",
    ]
    assert r["tool_results"]["missing"] == ["call_greet_2"]
    one = report(bound(t, turns_served=3, results_returned=FIRST_THREE), t)
    assert one["incomplete"] == ["turn 4 of 4 not served"]


def test_no_script_or_an_unreadable_one_is_never_complete() -> None:
    t = ends_itself()
    unreadable = report(bound(t, turns_served=4), None, script_error="its file is gone")
    assert unreadable["complete"] is False
    assert unreadable["incomplete"] == ["its script cannot be read: its file is gone"]
    unscripted = SessionState(id="s", created=0.0, last_seen=0.0)
    r = report(unscripted, None)
    assert r["complete"] is False and r["incomplete"] == ["no script: nothing was replayed"]
