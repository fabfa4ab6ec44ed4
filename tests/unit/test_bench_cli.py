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


def test_the_churn_suite_takes_its_session_counts() -> None:
    args = arguments(["churn", "--sessions", "1000", "--baseline", "0"])
    assert (args.suites, args.sessions, args.baseline) == (["churn"], 1000, 0)
    defaults = arguments(["churn"])
    assert (defaults.sessions, defaults.baseline) == (200_000, 50_000)


def test_the_churn_targets_follow_each_stores_run() -> None:
    from bench import churn
    from bench.__main__ import churn_targets

    run = {
        "ttl": 5.0,
        "rate": 1000.0,
        "sessions": 200_000,
        "rss_ratio": 1.01,
        "list_ratio": 1.7,
        "kept_at_end": 6000,
        "expired_after_drain": 200_000,
        "kept_after_drain": 0,
    }
    run["met"] = churn.met(run)
    assert run["met"] == {"rss": True, "list": False, "kept": True, "expired": True}
    rows = churn_targets({"churn": {"sqlite": run}})
    assert [(got, met) for _, got, _, met in rows] == [
        ("1.01x", True),
        ("1.70x", False),
        ("1.20", True),
        ("200000/200000", True),
    ]
