"""The benchmark command's arguments (the benchmark itself is not run here: no timing in tests)."""

from __future__ import annotations

import pytest

from bench.__main__ import SUITES, arguments


def test_a_bare_run_means_every_suite() -> None:
    assert arguments([]).suites == list(SUITES)


def test_named_suites_are_kept_in_order() -> None:
    args = arguments(
        ["stores", "slow", "--repeat", "5", "--redis", "redis://127.0.0.1:1/0", "--workers", "2"]
    )
    assert (args.suites, args.repeat, args.redis, args.workers) == (
        ["stores", "slow"],
        5,
        "redis://127.0.0.1:1/0",
        2,
    )


def test_an_unknown_suite_is_refused_with_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        arguments(["throughput", "nope"])
    assert exited.value.code == 2
    assert (
        "unknown suite nope: choose from throughput, footprint, slow, stores"
        in capsys.readouterr().err
    )
