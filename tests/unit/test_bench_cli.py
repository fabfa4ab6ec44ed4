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


def test_the_slow_table_shows_each_partys_cpu_against_the_ceiling() -> None:
    from bench import slow

    def path(p99: float, hop: float, kernel: float) -> dict[str, object]:
        cpu = {"hop": hop, "hop_kernel": kernel, "upstream": 6.1, "upstream_kernel": 4.7}
        return {"gap_p99_ms": p99, "cpu_us_per_event": {**cpu, "client": 8.2, "client_kernel": 5.5}}

    run = {
        "budget_ms": 10.0,
        "workers": 1,
        "streams_within_budget": 0,
        "nginx_streams_within_budget": 0,
        "runs": [
            {
                "streams": 2000,
                "direct": path(22.0, 0.0, 0.0),
                "nginx": path(40.0, 10.2, 8.1),
                "proxy": path(37.7, 21.5, 11.2),
                "added_p99_ms": 15.7,
                "nginx_added_p99_ms": 18.0,
                "hop_ceiling_us_per_event": 10.0,
            }
        ],
    }
    row = slow.table([run]).splitlines()[2].split()
    # streams, direct p99, proxy, nginx, ceiling, proxy cpu (kernel), nginx cpu (kernel), ...
    assert row[:5] == ["2000", "22.00", "+15.70", "+18.00", "10.0"]
    assert row[5:9] == ["21.5", "(11.2)", "10.2", "(8.1)"]
    assert row[9:] == ["6.1", "(4.7)", "8.2", "(5.5)"]
    assert slow.cpu_vs_nginx(run) == 21.5 / 10.2  # the forwarded-CPU target's figure
