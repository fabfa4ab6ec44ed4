"""How often idle sessions are swept, and how long a store that expires keys on its own keeps
them: a quarter of the ttl, within 0.1 s and a minute."""

from __future__ import annotations

import pytest

from proxy.sessions.expiry import LEAST_SECONDS_APART, MOST_SECONDS_APART, interval, keys_live


@pytest.mark.parametrize(
    ("ttl", "every"),
    [
        (3600.0, MOST_SECONDS_APART),  # a day-long ttl still sweeps every minute
        (240.0, MOST_SECONDS_APART),
        (120.0, 30.0),
        (2.0, 0.5),
        (0.2, LEAST_SECONDS_APART),  # never a busy loop
        (0.0, LEAST_SECONDS_APART),
    ],
)
def test_the_sweep_runs_every_quarter_of_the_ttl_within_bounds(ttl: float, every: float) -> None:
    assert interval(ttl) == every


def test_the_bounds_are_a_tenth_of_a_second_and_a_minute() -> None:
    assert (LEAST_SECONDS_APART, MOST_SECONDS_APART) == (0.1, 60.0)


@pytest.mark.parametrize(("ttl", "live"), [(86400.0, 86460.0), (120.0, 150.0), (2.0, 2.5)])
def test_keys_live_one_sweep_past_the_ttl(ttl: float, live: float) -> None:
    """So the sweep has taken the session out of the indexes before its keys go."""
    assert keys_live(ttl) == live


def test_no_ttl_means_keys_that_never_expire() -> None:
    assert keys_live(0) == 0
