"""The memory store's own bookkeeping: sessions listed by creation number after many are forgotten,
the idle order that expiry and counting walk, the events log bound, and the shared counter."""

from __future__ import annotations

import pytest

import proxy.store.memory as memory
from proxy.store.memory import MemoryStore
from proxy.store.state import SessionState


def bump(state: SessionState) -> None:
    state.scripted_responses += 1


async def all_pages(store: MemoryStore, limit: int, *, newest_first: bool = False) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        found, cursor = await store.page(cursor, limit, newest_first=newest_first)
        assert len(found) <= limit
        ids.extend(s.id for s in found)
        if cursor is None:
            return ids


async def test_listing_stays_in_creation_order_after_most_sessions_are_forgotten() -> None:
    """Forgotten sessions are taken out of the order once they are as many as the rest."""
    store = MemoryStore()
    for i in range(20):
        await store.update(f"s{i:02d}", bump, now=float(i))
    for i in range(0, 20, 3):
        await store.delete(f"s{i:02d}")
    await store.expire(before=10.0)  # s00..s09 go, with those deleted already
    kept = [f"s{i:02d}" for i in range(10, 20) if i % 3]
    assert await all_pages(store, 3) == kept
    assert await all_pages(store, 2, newest_first=True) == kept[::-1]
    await store.update("late", bump, now=30.0)
    assert (await all_pages(store, 4))[-1] == "late"


async def test_a_cursor_from_before_a_compaction_still_goes_on_after_it() -> None:
    store = MemoryStore()
    for i in range(6):
        await store.update(f"s{i}", bump, now=float(i))
    first, cursor = await store.page(None, 2)
    assert [s.id for s in first] == ["s0", "s1"] and cursor is not None
    for name in ("s0", "s1", "s2", "s3"):  # more than half: the order is rebuilt
        await store.delete(name)
    rest, more = await store.page(cursor, 10)
    assert [s.id for s in rest] == ["s4", "s5"] and more is None


async def test_a_session_seen_again_moves_to_the_end_of_the_idle_order() -> None:
    store = MemoryStore()
    await store.update("a", bump, now=1.0)
    await store.update("b", bump, now=2.0)
    await store.update("a", bump, now=3.0)
    assert await store.count(since=2.5) == 1
    assert await store.expire(before=2.5) == 1
    assert await store.get("b") is None and await store.get("a") is not None


async def test_an_update_starts_from_a_copy_so_a_failing_change_loses_nothing() -> None:
    store = MemoryStore()
    await store.update("s", lambda s: s.forwarded.update(main=1), now=1.0)

    def broken(state: SessionState) -> None:
        state.forwarded["main"] = 99
        state.results_returned.append("call_x")
        raise RuntimeError("half-way")

    with pytest.raises(RuntimeError):
        await store.update("s", broken, now=2.0)
    state = await store.get("s")
    assert state is not None
    assert (state.forwarded, state.results_returned, state.last_seen) == ({"main": 1}, [], 1.0)


async def test_a_state_read_earlier_is_not_changed_by_a_later_update() -> None:
    store = MemoryStore()
    earlier = await store.update("s", bump, now=1.0)
    await store.update("s", bump, now=2.0)
    assert earlier.scripted_responses == 1 and earlier.last_seen == 1.0


async def test_the_events_log_is_bounded_across_all_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "EVENTS_KEPT", 5)
    store = MemoryStore()
    for i in range(8):
        await store.update(f"s{i % 2}", bump, now=float(i), event={"detail": str(i)})
    assert [e["detail"] for e in await store.events()] == ["3", "4", "5", "6", "7"]
    assert [e["detail"] for e in await store.events(limit=2)] == ["6", "7"]
    assert await store.events(limit=-1) == []


async def test_a_claim_is_kept_by_its_first_session_until_that_one_goes() -> None:
    store = MemoryStore()
    assert await store.claim("greeting", "a") == "a"
    assert await store.claim("greeting", "b") == "a"
    assert await store.claim("greeting", "a") == "a"
    await store.update("b", bump, now=1.0)
    assert await store.delete("b") is True
    assert await store.owner("greeting") == "a"  # b never owned it: a's claim stays
    assert await store.delete("a") is False  # no state, but its claim goes all the same
    assert await store.owner("greeting") is None


async def test_the_counter_goes_up_by_one_and_never_below_its_floor() -> None:
    store = MemoryStore()
    assert [await store.next_sequence("dumps") for _ in range(3)] == [1, 2, 3]
    assert await store.next_sequence("dumps", at_least=10) == 11
    assert await store.next_sequence("dumps", at_least=5) == 12
    assert await store.next_sequence("other") == 1


async def test_a_page_cursor_must_be_one_of_ours() -> None:
    with pytest.raises(ValueError, match="not a cursor this store made"):
        await MemoryStore().page("1.0:s1", 5)
