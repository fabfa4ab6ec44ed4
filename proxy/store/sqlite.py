"""SQLite session state: embedded, on one host, safe with several workers and across restarts.

WAL mode and `BEGIN IMMEDIATE` make each update one transaction that no other worker can
interleave with; a killed process loses nothing that was committed. Every call runs on the store's
own thread, so the event loop never waits on the disk. Sessions are indexed by creation (for
listing a page at a time) and by their last request (for expiry).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import orjson

from proxy.store.state import (
    EVENTS_KEPT,
    Change,
    Event,
    EventOf,
    SessionState,
    cursor_of,
    event_for,
    read_cursor,
)

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, state BLOB NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS owners (name TEXT PRIMARY KEY, session TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS scripts (session TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, session TEXT NOT NULL, data BLOB NOT NULL);
DROP INDEX IF EXISTS events_by_session; -- nothing reads events by session; the index only slowed writes
"""
# a store made before sessions expired has no last_seen column: its sessions count as seen now
INDEXES = """
CREATE INDEX IF NOT EXISTS sessions_by_creation ON sessions (created, id);
CREATE INDEX IF NOT EXISTS sessions_by_last_seen ON sessions (last_seen);
CREATE INDEX IF NOT EXISTS owners_by_session ON owners (session);
"""
EXPIRED_AT_ONCE = 1000  # sessions removed per transaction, so that workers wait little


class SqliteStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        self._db = self._thread.submit(self._connect).result()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(
            "PRAGMA synchronous=NORMAL"
        )  # a crashed process loses nothing; WAL keeps it whole
        db.execute("PRAGMA busy_timeout=30000")
        db.executescript(SCHEMA)
        if "last_seen" not in _columns(db):
            db.execute("BEGIN IMMEDIATE")
            if "last_seen" not in _columns(db):  # another process may have just added it
                db.execute("ALTER TABLE sessions ADD COLUMN last_seen REAL NOT NULL DEFAULT 0")
                db.execute("UPDATE sessions SET last_seen = ?", (time.time(),))
            db.execute("COMMIT")
        db.executescript(INDEXES)
        return db

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    def _transaction(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            result = fn(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return result

    async def get(self, session: str) -> SessionState | None:
        def read() -> SessionState | None:
            row = self._db.execute("SELECT state FROM sessions WHERE id = ?", (session,)).fetchone()
            return None if row is None else SessionState.from_dict(orjson.loads(row[0]))

        return await self._run(read)

    async def update(
        self, session: str, change: Change, *, now: float, event: Event | EventOf | None = None
    ) -> SessionState:
        def apply(db: sqlite3.Connection) -> SessionState:
            row = db.execute("SELECT state FROM sessions WHERE id = ?", (session,)).fetchone()
            if row is None:
                state = SessionState(id=session, created=now, last_seen=now)
            else:
                state = SessionState.from_dict(orjson.loads(row[0]))
            change(state)
            state.last_seen = now
            db.execute(
                "INSERT INTO sessions (id, state, created, last_seen) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET state = excluded.state, last_seen = excluded.last_seen",
                (session, orjson.dumps(state.to_dict()), state.created, now),
            )
            logged = event_for(event, state)
            if logged is not None:
                cursor = db.execute(
                    "INSERT INTO events (session, data) VALUES (?, ?)",
                    (session, orjson.dumps(logged)),
                )
                if (
                    cursor.lastrowid is not None and cursor.lastrowid % 100 == 0
                ):  # keep the log bounded
                    db.execute(
                        "DELETE FROM events WHERE id <= ?", (cursor.lastrowid - EVENTS_KEPT,)
                    )
            return state

        return await self._run(lambda: self._transaction(apply))

    async def events(self, limit: int = 200) -> list[Event]:
        def read() -> list[Event]:
            rows = self._db.execute(
                "SELECT data FROM events ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
            return [orjson.loads(r[0]) for r in reversed(rows)]

        return await self._run(read)

    async def page(
        self, after: str | None, limit: int, *, newest_first: bool = False
    ) -> tuple[list[SessionState], str | None]:
        start = read_cursor(after) if after is not None else None
        order, beyond = ("DESC", "<") if newest_first else ("ASC", ">")
        query = "SELECT state FROM sessions "
        if start is not None:
            query += f"WHERE (created, id) {beyond} (?, ?) "
        query += f"ORDER BY created {order}, id {order} LIMIT ?"
        args = (*start, limit + 1) if start is not None else (limit + 1,)

        def read() -> list[SessionState]:
            rows = self._db.execute(query, args).fetchall()
            return [SessionState.from_dict(orjson.loads(r[0])) for r in rows]

        found = await self._run(read)
        more = len(found) > limit
        found = found[:limit]
        return found, (cursor_of(found[-1]) if more else None)

    async def count(self, since: float | None = None) -> int:
        def read() -> int:
            if since is None:
                row = self._db.execute("SELECT count(*) FROM sessions").fetchone()
            else:
                query = "SELECT count(*) FROM sessions WHERE last_seen >= ?"
                row = self._db.execute(query, (since,)).fetchone()
            return int(row[0])

        return await self._run(read)

    async def expire(self, before: float) -> int:
        def remove(db: sqlite3.Connection) -> int:
            ids = [
                row[0]
                for row in db.execute(
                    "SELECT id FROM sessions WHERE last_seen < ? LIMIT ?", (before, EXPIRED_AT_ONCE)
                )
            ]
            for session in ids:
                _forget(db, session)
            return len(ids)

        gone = 0
        while True:
            removed = await self._run(lambda: self._transaction(remove))
            gone += removed
            if removed < EXPIRED_AT_ONCE:
                return gone

    async def delete(self, session: str) -> bool:
        return await self._run(lambda: self._transaction(lambda db: _forget(db, session)))

    async def claim(self, name: str, session: str) -> str:
        def take(db: sqlite3.Connection) -> str:
            db.execute(
                "INSERT OR IGNORE INTO owners (name, session) VALUES (?, ?)", (name, session)
            )
            owner: str = db.execute(
                "SELECT session FROM owners WHERE name = ?", (name,)
            ).fetchone()[0]
            return owner

        return await self._run(lambda: self._transaction(take))

    async def owner(self, name: str) -> str | None:
        def read() -> str | None:
            row = self._db.execute("SELECT session FROM owners WHERE name = ?", (name,)).fetchone()
            return None if row is None else str(row[0])

        return await self._run(read)

    async def put_script(self, session: str, data: bytes) -> None:
        def write(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO scripts (session, data) VALUES (?, ?) "
                "ON CONFLICT(session) DO UPDATE SET data = excluded.data",
                (session, data),
            )

        await self._run(lambda: self._transaction(write))

    async def get_script(self, session: str) -> bytes | None:
        def read() -> bytes | None:
            row = self._db.execute(
                "SELECT data FROM scripts WHERE session = ?", (session,)
            ).fetchone()
            return None if row is None else bytes(row[0])

        return await self._run(read)

    async def next_sequence(self, name: str, *, at_least: int = 0) -> int:
        def bump(db: sqlite3.Connection) -> int:
            row = db.execute(
                "INSERT INTO counters (name, value) VALUES (?, ?) ON CONFLICT(name) "
                "DO UPDATE SET value = max(value, ?) + 1 RETURNING value",
                (name, at_least + 1, at_least),
            ).fetchone()
            return int(row[0])

        return await self._run(lambda: self._transaction(bump))

    async def check(self) -> None:
        await self._run(lambda: self._db.execute("SELECT count(*) FROM sessions").fetchone())

    async def close(self) -> None:
        await self._run(self._db.close)
        self._thread.shutdown(wait=True)


def _columns(db: sqlite3.Connection) -> set[str]:
    return {row[1] for row in db.execute("PRAGMA table_info(sessions)")}


def _forget(db: sqlite3.Connection, session: str) -> bool:
    """The session, its script and its claims gone; whether there was a session."""
    db.execute("DELETE FROM scripts WHERE session = ?", (session,))
    db.execute("DELETE FROM owners WHERE session = ?", (session,))
    return db.execute("DELETE FROM sessions WHERE id = ?", (session,)).rowcount > 0
