"""The store contract, the same for every backend: memory, SQLite and a real Redis server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from proxy.store import Store, open_store
from proxy.store.state import SessionState

Opener = Callable[[], Store]


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    """Opens another handle on the same store (another worker, another replica)."""
    if request.param == "memory":
        store = open_store("memory://")
        yield lambda: store
        return
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/state.db"
    else:
        url = request.getfixturevalue("redis_url")
    handles: list[Store] = []

    def open_one() -> Store:
        handles.append(open_store(url))
        return handles[-1]

    yield open_one
    for handle in handles:
        await handle.close()


def bump(state: SessionState) -> None:
    state.scripted_responses += 1


async def test_update_creates_then_changes_and_get_reads_it(opener: Opener) -> None:
    store = opener()
    assert await store.get("s1") is None
    first = await store.update("s1", bump, now=100.0)
    assert (first.id, first.created, first.scripted_responses) == ("s1", 100.0, 1)
    await store.update("s1", lambda s: s.forwarded.update(main=2), now=101.0)
    again = await store.get("s1")
    assert again is not None
    assert (again.created, again.last_seen, again.scripted_responses, again.forwarded) == (
        100.0,
        101.0,
        1,
        {"main": 2},
    )
    assert [s.id for s in (await store.page(None, 10))[0]] == ["s1"]


async def test_concurrent_updates_from_two_handles_lose_nothing(opener: Opener) -> None:
    a, b = opener(), opener()
    await asyncio.gather(
        *(h.update("hot", bump, now=time.time()) for _ in range(40) for h in (a, b))
    )
    state = await a.get("hot")
    assert state is not None and state.scripted_responses == 80


async def test_a_failing_change_leaves_the_state_as_it_was(opener: Opener) -> None:
    store = opener()
    await store.update("s", bump, now=1.0)

    def broken(state: SessionState) -> None:
        state.scripted_responses += 100
        raise RuntimeError("half-way")

    with pytest.raises(RuntimeError):
        await store.update("s", broken, now=2.0)
    state = await store.get("s")
    assert state is not None and state.scripted_responses == 1


async def test_events_are_logged_with_their_change_newest_last(opener: Opener) -> None:
    store = opener()
    for i in range(5):
        await store.update("s1", bump, now=float(i), event={"session": "s1", "detail": str(i)})

    def decided(state: SessionState) -> dict[str, str] | None:  # decided by the changed state
        return {"session": "s1", "detail": f"n={state.scripted_responses}"}

    await store.update("s1", bump, now=5.0, event=decided)
    await store.update("s1", bump, now=6.0, event=lambda state: None)  # nothing to log
    events = await opener().events(limit=3)
    assert [e["detail"] for e in events] == ["3", "4", "n=6"]
    assert len(await store.events()) == 6
    assert await store.events(limit=0) == []


async def test_claims_scripts_sequences_and_delete(opener: Opener) -> None:
    a, b = opener(), opener()
    owners = await asyncio.gather(*(h.claim("traj", f"s{i}") for i, h in enumerate([a, b] * 5)))
    assert len(set(owners)) == 1  # exactly one session took it, and everyone agrees which
    winner = owners[0]
    assert await b.owner("traj") == winner
    await a.update(winner, bump, now=1.0)
    await a.put_script(winner, b'[{"role": "user", "content": "t"}]')
    assert await b.get_script(winner) == b'[{"role": "user", "content": "t"}]'

    numbers = await asyncio.gather(*(h.next_sequence("dumps", at_least=7) for h in [a, b] * 10))
    assert sorted(numbers) == list(range(8, 28))

    assert await b.delete(winner) is True
    assert await a.get(winner) is None and await a.get_script(winner) is None
    assert await a.owner("traj") is None  # the trajectory is free again
    assert await a.claim("traj", "newcomer") == "newcomer"
    assert await b.delete(winner) is False


async def listed(store: Store, limit: int, *, newest_first: bool = False) -> list[list[str]]:
    """Every page of the store's list, as session ids, following the cursors."""
    pages, cursor = [], None
    while True:
        found, cursor = await store.page(cursor, limit, newest_first=newest_first)
        pages.append([s.id for s in found])
        if cursor is None:
            return pages


async def test_sessions_are_listed_a_page_at_a_time_in_creation_order(opener: Opener) -> None:
    a, b = opener(), opener()
    # s3 and s4 are made at the same instant: in an order the store keeps (SQLite and Redis: by id)
    for name, at in (("s1", 1.0), ("s2", 2.0), ("s4", 3.0), ("s3", 3.0), ("s5", 4.0)):
        await a.update(name, bump, now=at)
    await a.update("s1", bump, now=9.0)  # seen later: still listed where it was made
    [order] = await listed(b, 5)
    assert order[:2] == ["s1", "s2"] and set(order[2:4]) == {"s3", "s4"} and order[4] == "s5"
    assert await listed(b, 2) == [order[:2], order[2:4], order[4:]]
    # a cursor between two of the same instant
    assert [p for [p] in await listed(b, 1)] == order
    assert [p for [p] in await listed(b, 1, newest_first=True)] == order[::-1]
    assert await listed(b, 2, newest_first=True) == [order[:2:-1], order[2:0:-1], order[:1]]
    _, cursor = await b.page(None, 3)
    assert cursor is not None
    await a.delete(order[3])  # gone between two pages: the next page goes on after the cursor
    rest, _ = await b.page(cursor, 10)
    assert [s.id for s in rest] == ["s5"]
    assert await listed(opener(), 10) == [[*order[:3], "s5"]]
    with pytest.raises(ValueError, match="not a cursor"):
        await b.page("no cursor of ours", 2)


async def test_idle_sessions_expire_with_their_scripts_and_claims(opener: Opener) -> None:
    a, b = opener(), opener()
    await a.update("old", bump, now=100.0)
    assert await a.claim("traj", "old") == "old"
    await a.put_script("old", b"[]")
    await a.update("busy", bump, now=100.0)
    await a.update("busy", bump, now=200.0)  # a request later: idle for less
    await a.update("new", bump, now=250.0)
    assert await b.count() == 3 and await b.count(since=200.0) == 2
    assert await b.expire(before=150.0) == 1
    assert await a.get("old") is None and await a.get_script("old") is None
    assert await b.owner("traj") is None  # free for the next session to claim
    assert await listed(b, 10) == [["busy", "new"]]
    assert await b.expire(before=150.0) == 0  # counted once
    assert await b.count() == 2
    again = await a.update("old", bump, now=300.0)  # it comes back: a new session
    assert (again.created, again.scripted_responses) == (300.0, 1)
    assert await b.expire(before=1000.0) == 3
    assert await b.count() == 0 and await listed(b, 10) == [[]]


async def test_redis_keys_of_a_session_expire_on_their_own(redis_url: str) -> None:
    import redis.asyncio as aioredis

    store = open_store(redis_url, ttl=60)
    await store.update("s1", bump, now=time.time())
    await store.claim("traj", "s1")
    await store.put_script("s1", b"[]")
    await store.update("s1", bump, now=time.time())
    client = aioredis.Redis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter("replay-proxy:*")]
        expiring = {k.decode(): await client.pttl(k) for k in keys}
    finally:
        await client.aclose()
        await store.close()
    per_session = {k for k in expiring if "index:" not in k}
    assert per_session == {
        "replay-proxy:session:s1",
        "replay-proxy:script:s1",
        "replay-proxy:claims:s1",
        "replay-proxy:owner:traj",
    }
    for key in per_session:
        assert 0 < expiring[key] <= 60_000, key  # a ttl, set again by the last request
    assert all(expiring[k] == -1 for k in expiring if "index:" in k)  # the indexes stay


async def test_a_redis_session_back_after_its_keys_expired_is_listed_where_it_is_now(
    redis_url: str,
) -> None:
    import redis.asyncio as aioredis

    store = open_store(redis_url, ttl=60)
    await store.update("a", bump, now=100.0)
    await store.update("b", bump, now=150.0)
    client = aioredis.Redis.from_url(redis_url)
    await client.delete("replay-proxy:session:a")  # as Redis does once the ttl has run out
    await client.aclose()
    again = await store.update("a", bump, now=200.0)  # before the sweep: a new session
    pages = await listed(store, 1)
    await store.close()
    assert again.created == 200.0
    assert pages == [["b"], ["a"]]  # not skipped, and listed by when it was made again


async def test_a_sqlite_store_from_before_expiry_counts_its_sessions_as_seen_now(
    tmp_path: Path,
) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, state BLOB NOT NULL, created REAL NOT NULL)"
    )
    state = SessionState(id="old", created=1.0, last_seen=1.0)
    old.execute("INSERT INTO sessions VALUES (?, ?, ?)", ("old", json.dumps(state.to_dict()), 1.0))
    old.commit()
    old.close()
    before = time.time()
    store = open_store(f"sqlite:///{path}")
    assert await store.expire(before - 60) == 0  # seen at the upgrade, not at 1.0
    assert [s.id for s in (await store.page(None, 10))[0]] == ["old"]
    assert await store.expire(time.time() + 1) == 1
    await store.close()


async def test_state_survives_reopening(tmp_path: Path, redis_url: str) -> None:
    for url in (f"sqlite:///{tmp_path}/s.db", redis_url):
        store = open_store(url)
        await store.update("kept", bump, now=5.0)
        await store.close()
        reopened = open_store(url)
        state = await reopened.get("kept")
        await reopened.close()
        assert state is not None and state.scripted_responses >= 1


def test_store_urls_are_checked() -> None:
    for bad in ("sqlite://", "sqlite:///", "postgres://x", "nonsense"):
        with pytest.raises(ValueError, match="--store"):
            open_store(bad)


def test_a_state_copy_is_equal_and_shares_no_container() -> None:
    state = SessionState(id="s", created=1.0, last_seen=2.0, script_name="t", turns_served=3)
    state.forwarded["main"] = 1
    state.results_returned.append("call_1")
    state.recorded_used.append("d:0")
    copy = state.copy()
    assert copy.to_dict() == state.to_dict()
    copy.forwarded["main"] += 1
    copy.results_returned.append("call_2")
    copy.recorded_used.append("d:1")
    assert state.forwarded == {"main": 1} and state.results_returned == ["call_1"]
    assert state.recorded_used == ["d:0"]
