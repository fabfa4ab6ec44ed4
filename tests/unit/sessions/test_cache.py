"""The cache of trajectories loaded after start-up: bounded by file bytes, least recently used
first out, the newest always kept."""

from __future__ import annotations

from pathlib import Path

from proxy.formats import load_all, load_file
from proxy.replay.trajectory import Trajectory
from proxy.sessions.cache import TrajectoryCache

GREETING = Path(__file__).parents[3] / "examples" / "greeting.json"
# five NeMo-Gym rollouts, one per line (tests/fixtures/harness_logs/nemo-gym/README.md)
ROLLOUTS = Path(__file__).parents[2] / "fixtures" / "harness_logs" / "nemo-gym" / "xlam_fc.jsonl"


def trajectory() -> Trajectory:
    return load_file(GREETING)


def test_the_least_recently_used_goes_first_when_over_the_bound() -> None:
    cache, t = TrajectoryCache(limit=300), trajectory()
    cache.put(("file", "a"), t, 100)
    cache.put(("file", "b"), t, 100)
    cache.put(("file", "c"), t, 100)
    assert cache.get(("file", "a")) is t  # a is now the most recently used
    cache.put(("file", "d"), t, 100)
    assert cache.get(("file", "b")) is None
    assert all(cache.get(("file", k)) is t for k in "acd")
    assert cache.report() == {"entries": 3, "bytes": 300, "limit": 300, "evicted": 1}


def test_the_newest_is_kept_even_alone_over_the_bound() -> None:
    cache, t = TrajectoryCache(limit=50), trajectory()
    cache.put(("file", "small"), t, 10)
    cache.put(("file", "huge"), t, 500)
    assert len(cache) == 1 and cache.get(("file", "huge")) is t
    assert cache.report() == {"entries": 1, "bytes": 500, "limit": 50, "evicted": 1}


def test_putting_a_key_again_replaces_its_size() -> None:
    cache, t = TrajectoryCache(limit=1000), trajectory()
    cache.put(("admin", "digest"), t, 400)
    cache.put(("admin", "digest"), t, 100)
    assert (len(cache), cache.size, cache.evicted) == (1, 100, 0)


def test_a_miss_is_none_and_changes_nothing() -> None:
    cache = TrajectoryCache(limit=10)
    assert cache.get(("file", "absent")) is None
    assert cache.report() == {"entries": 0, "bytes": 0, "limit": 10, "evicted": 0}


def test_only_files_are_listed_as_files_not_admin_scripts() -> None:
    cache, t = TrajectoryCache(limit=1000), trajectory()
    other = load_file(GREETING, name="other")
    cache.put(("admin", t.digest), t, 10)
    cache.put(("file", "other"), other, 10)
    assert cache.files() == [other]


def test_a_file_of_several_trajectories_is_one_entry_of_its_size() -> None:
    rollouts, size = load_all(ROLLOUTS), ROLLOUTS.stat().st_size
    cache, t = TrajectoryCache(limit=size + size // 2), trajectory()
    cache.put(("file", "lc"), rollouts, size)
    assert cache.get_all(("file", "lc")) == tuple(rollouts)
    assert cache.files() == rollouts
    assert cache.report() == {"entries": 1, "bytes": size, "limit": size + size // 2, "evicted": 0}
    cache.put(("file", "other"), t, size)  # over the bound: the file goes whole, not one rollout
    assert cache.get_all(("file", "lc")) is None
    assert cache.files() == [t] and cache.report()["evicted"] == 1
