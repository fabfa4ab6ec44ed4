"""The store contract, the same for every backend: memory, SQLite and a real Redis server."""

from __future__ import annotations

import asyncio
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
    assert [s.id for s in await store.sessions()] == ["s1"]


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
