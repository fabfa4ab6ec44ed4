"""The SQLite store on a file in tmp_path: the whole state kept across a reopening, the counter and
claims in their tables, expiry in batches, and the events log kept bounded."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import proxy.store.sqlite as sqlite_store
from proxy.store import open_store
from proxy.store.sqlite import SqliteStore
from proxy.store.state import SessionState
from tests.unit.store.test_state import busy


def bump(state: SessionState) -> None:
    state.scripted_responses += 1


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    opened = SqliteStore(tmp_path / "state.db")
    yield opened
    await opened.close()


async def test_every_field_of_a_state_survives_a_reopening(tmp_path: Path) -> None:
    kept = busy()

    def become(state: SessionState) -> None:
        for f in dataclasses.fields(SessionState):
            if f.name not in ("id", "created", "last_seen"):
                setattr(state, f.name, getattr(kept, f.name))

    first = SqliteStore(tmp_path / "state.db")
    await first.update(kept.id, become, now=kept.created)
    await first.close()
    second = SqliteStore(tmp_path / "state.db")
    try:
        state = await second.get(kept.id)
    finally:
        await second.close()
    assert state is not None
    assert state == dataclasses.replace(kept, last_seen=kept.created)  # seen at the update


async def test_the_url_names_a_relative_or_an_absolute_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///data/state.db")
    absolute = open_store(f"sqlite:///{tmp_path}/abs/state.db")
    try:
        assert isinstance(relative, SqliteStore) and isinstance(absolute, SqliteStore)
        assert relative.path == Path("data/state.db")
        assert absolute.path == tmp_path / "abs" / "state.db"
        assert (tmp_path / "data" / "state.db").is_file()
    finally:
        await relative.close()
        await absolute.close()


async def test_the_file_is_in_wal_mode(store: SqliteStore) -> None:
    db = sqlite3.connect(store.path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


async def test_the_counter_takes_its_floor_when_new_and_when_behind(store: SqliteStore) -> None:
    assert await store.next_sequence("dumps", at_least=41) == 42
    assert await store.next_sequence("dumps") == 43
    assert await store.next_sequence("dumps", at_least=100) == 101
    assert await store.next_sequence("dumps", at_least=3) == 102
    assert await store.next_sequence("other") == 1


async def test_a_script_put_again_replaces_the_first(store: SqliteStore) -> None:
    await store.put_script("s", b"[1]")
    await store.put_script("s", b"[2]")
    assert await store.get_script("s") == b"[2]"
    assert await store.get_script("nobody") is None


async def test_a_claim_stays_with_its_first_session(store: SqliteStore) -> None:
    assert await store.claim("greeting", "a") == "a"
    assert await store.claim("greeting", "b") == "a"
    assert await store.owner("greeting") == "a"
    assert await store.owner("unclaimed") is None


async def test_expiry_takes_sessions_in_batches_until_none_is_left(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "EXPIRED_AT_ONCE", 3)
    for i in range(8):
        await store.update(f"old{i}", bump, now=10.0)
        await store.claim(f"traj{i}", f"old{i}")
    await store.update("recent", bump, now=100.0)
    assert await store.expire(before=50.0) == 8
    assert await store.count() == 1
    assert [await store.owner(f"traj{i}") for i in range(8)] == [None] * 8


async def test_count_since_counts_by_the_last_request(store: SqliteStore) -> None:
    await store.update("a", bump, now=1.0)
    await store.update("b", bump, now=2.0)
    await store.update("a", bump, now=3.0)
    assert await store.count(since=2.0) == 2
    assert await store.count(since=2.5) == 1
    assert await store.count(since=4.0) == 0


async def test_the_events_log_is_trimmed_every_hundred_events(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "EVENTS_KEPT", 10)
    for i in range(99):
        await store.update("s", bump, now=float(i), event={"detail": str(i)})
    assert len(await store.events(limit=1000)) == 99  # not trimmed yet
    await store.update("s", bump, now=99.0, event={"detail": "99"})
    events = await store.events(limit=1000)
    assert [e["detail"] for e in events] == [str(i) for i in range(90, 100)]


async def test_a_change_that_fails_rolls_back_its_event_too(store: SqliteStore) -> None:
    def broken(state: SessionState) -> None:
        raise RuntimeError("half-way")

    await store.update("s", bump, now=1.0, event={"detail": "kept"})
    with pytest.raises(RuntimeError):
        await store.update("s", broken, now=2.0, event={"detail": "lost"})
    assert [e["detail"] for e in await store.events()] == ["kept"]
    again = await store.update("s", bump, now=3.0)  # the store is usable after the rollback
    assert again.scripted_responses == 2


async def test_a_page_cursor_must_be_one_of_ours(store: SqliteStore) -> None:
    with pytest.raises(ValueError, match="not a cursor this store made"):
        await store.page("17", 5)
