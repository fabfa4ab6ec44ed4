"""Verdicts: only values that change between runs differ (volatile), or anything else (changed)."""

from __future__ import annotations

import pytest

from proxy.replay.volatile import CHANGED, VOLATILE, judge


@pytest.mark.parametrize(
    ("recorded", "received", "kind"),
    [
        ("Today is 2026-12-05.", "Today is 2027-01-14.", "a date"),
        ("at 2026-12-05T19:03:56.123Z", "at 2027-01-14T08:00:01Z", "a timestamp"),
        ("Sat Dec 05 2026 here", "Thu Jan 14 2027 here", "a written date"),
        ("Saturday, December 5, 2026 (", "Thursday, January 14, 2027 (", "a written date"),
        ("took until 19:03:56 then", "took until 08:00:01 then", "a time of day"),
        (
            "id 3f1c2a9e-8b7d-4c6e-9f0a-1b2c3d4e5f60 done",
            "id 0a9b8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d done",
            "a uuid",
        ),
        (
            "in /tmp/pytest-3/run/repo/x.py:",
            "in /tmp/ci.Ab12/w/repo/x.py:",
            "a path under a temporary folder",
        ),
        ("server http://127.0.0.1:41234/v1", "server http://127.0.0.1:39001/v1", "a local port"),
        ("commit 4c2d1ff start", "commit d8361e5 start", "a hex id"),
    ],
)
def test_values_that_change_between_runs_are_volatile(
    recorded: str, received: str, kind: str
) -> None:
    verdict = judge({"text": recorded}, {"text": received})
    assert verdict.verdict == VOLATILE
    assert kind in [k.name for k in verdict.masks]
    assert verdict.masks[0].pattern.sub("<masked>", recorded) == verdict.masks[0].pattern.sub(
        "<masked>", received
    )


def test_a_preset_mask_is_named_before_a_general_kind() -> None:
    verdict = judge(
        "Chunk ID: 4ff7a9\nWall time: 0.0000 seconds", "Chunk ID: 81e94c\nWall time: 0.0120 seconds"
    )
    assert [k.name for k in verdict.masks] == [
        "the output chunk id (Codex CLI)",
        "the command's wall time (Codex CLI)",
    ]


@pytest.mark.parametrize(
    ("recorded", "received"),
    [
        ("ran touch notes.txt", "ran TOUCH notes.txt"),
        ("answer: 42", "answer: 43"),  # a number is a result, not a volatile value
        ("in /home/ana/proj", "in /home/bob/proj"),  # not a temporary folder: a preset's to say
    ],
)
def test_anything_else_is_changed(recorded: str, received: str) -> None:
    verdict = judge({"t": recorded}, {"t": received})
    assert verdict.verdict == CHANGED and verdict.changed_at is not None
    assert verdict.changed_at.path == "t"


def test_a_changed_value_after_a_volatile_one_is_the_one_reported() -> None:
    recorded = {"messages": ["date 2026-12-05", "x", "run ls"]}
    received = {"messages": ["date 2027-01-14", "x", "run rm -rf"]}
    verdict = judge(recorded, received)
    assert verdict.verdict == CHANGED
    assert verdict.changed_at is not None and verdict.changed_at.path == "messages[2]"


def test_a_different_shape_is_changed() -> None:
    assert judge({"a": [1, 2]}, {"a": [1, 2, 3]}).verdict == CHANGED
    assert judge({"a": "x"}, {"b": "x"}).verdict == CHANGED
    assert judge({"a": 1}, {"a": "1"}).verdict == CHANGED


def test_a_long_text_is_judged_around_its_difference_only() -> None:
    head, tail = "lorem ipsum " * 200_000, " dolor sit" * 200_000
    verdict = judge(head + "2026-12-05" + tail, head + "2027-01-14" + tail)
    assert verdict.verdict == VOLATILE and [k.name for k in verdict.masks] == ["a date"]


def test_the_verdict_names_the_masks_in_its_dict() -> None:
    out = judge("on 2026-12-05", "on 2027-01-14").as_dict()
    assert out == {
        "verdict": "volatile",
        "masks": [{"what": "a date", "mask": r"\b\d{4}-\d\d-\d\d\b"}],
    }
    assert judge("a", "b").as_dict() == {"verdict": "changed"}
