"""Fault specs and the choice of which fault a request of a turn gets: pure, step by step."""

from __future__ import annotations

import pytest

from proxy.replay.faults import Fault, FaultError, Kind, due, parse_flag, parse_plan


def test_the_flag_form() -> None:
    assert parse_flag("3:429") == Fault(turn=3, kind=Kind.RATE_LIMITED)
    assert parse_flag(" 5:stall:2.5 ") == Fault(turn=5, kind=Kind.STALL, seconds=2.5)
    assert parse_flag("1:503:0.2").retry_headers() == {"retry-after": "1", "retry-after-ms": "200"}
    assert parse_flag("1:500").retry_headers() == {"retry-after": "1", "retry-after-ms": "1000"}
    assert [parse_flag(s).label for s in ("2:drop", "2:delay:1", "2:429:3")] == [
        "drop",
        "delay:1",
        "429:3",
    ]
    assert parse_flag("2:stall:1").serves and not parse_flag("2:drop").serves


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("3", "expected TURN:KIND[:SECONDS]"),
        ("x:429", "expected TURN:KIND[:SECONDS]"),
        ("0:429", "turn: Input should be greater than or equal to 1"),
        ("3:418", "kind: Input should be '429', '500', '503', 'drop', 'stall' or 'delay'"),
        ("3:stall", "stall needs seconds (how long), e.g. stall:5"),
        ("3:drop:1", "drop takes no seconds"),
        ("3:delay:soon", "'soon' is not a number of seconds"),
        ("3:delay:0", "seconds: Input should be greater than 0"),
        ("3:delay:7200", "seconds: Input should be less than or equal to 3600"),
    ],
)
def test_a_bad_flag_says_why(spec: str, reason: str) -> None:
    with pytest.raises(FaultError) as refused:
        parse_flag(spec)
    assert str(refused.value).startswith(f"{spec!r}: {reason}")


def test_the_admin_form_names_the_first_problem_and_where() -> None:
    plan = parse_plan([{"turn": 2, "kind": "429", "times": 3}, {"turn": 4, "kind": "drop"}])
    assert plan == (Fault(turn=2, kind=Kind.RATE_LIMITED, times=3), Fault(turn=4, kind=Kind.DROP))
    for data, reason in [
        ({"turn": 1}, "Input should be a valid list"),
        ([{"turn": 1, "kind": "429"}, {"turn": 2, "kind": "nope"}], "[1].kind: Input should be"),
        ([{"turn": 1, "kind": "429", "times": 0}], "[0].times: Input should be greater than"),
        ([{"turn": 1, "kind": "429", "when": "now"}], "[0].when: Extra inputs are not permitted"),
        ([{"kind": "429"}], "[0].turn: Field required"),
    ]:
        with pytest.raises(FaultError) as refused:
            parse_plan(data)
        assert str(refused.value).startswith(reason), refused.value


def test_a_fault_fires_its_times_for_its_turn_then_the_next_one_of_that_turn() -> None:
    plan = (
        Fault(turn=2, kind=Kind.SERVER_ERROR, times=2),
        Fault(turn=2, kind=Kind.DROP),
        Fault(turn=5, kind=Kind.RATE_LIMITED),
    )
    assert due(plan, [], 1) is None
    assert due(plan, [], 2) == 0
    assert due(plan, [1], 2) == 0
    assert due(plan, [2], 2) == 1  # then the drop
    assert due(plan, [2, 1], 2) is None  # then turn 2 is served normally
    assert due(plan, [2, 1], 5) == 2
    assert due((), [], 2) is None
