"""Session state behind one small interface; the backend is chosen by --store URL.

Every operation is atomic per session: `update` applies a change to the current state as one
step, so concurrent requests of one session never lose each other's counts. An update may also
append an event to a log of recent events (for the status page's timelines), bounded in size
across all sessions rather than per session.

Sessions are listed a page at a time, in the order they were created, and forgotten once idle
for the store's `ttl` (--session-ttl): `expire` removes them with their script and claims (Redis
also lets the keys expire on their own), so a proxy that runs for weeks holds only the sessions
of the last day.
"""

from __future__ import annotations

from typing import Protocol

from proxy.store.state import Change, Event, EventOf, SessionState

__all__ = ["Change", "Event", "SessionState", "Store", "open_store"]


class Store(Protocol):
    async def get(self, session: str) -> SessionState | None: ...

    async def update(
        self, session: str, change: Change, *, now: float, event: Event | EventOf | None = None
    ) -> SessionState:
        """Apply `change` to the session's state (created if missing) atomically, and log
        `event` with it (if a function, what it returns for the changed state)."""
        ...

    async def events(self, limit: int = 200) -> list[Event]:
        """The most recent events of all sessions, newest last."""
        ...

    async def page(
        self, after: str | None, limit: int, *, newest_first: bool = False
    ) -> tuple[list[SessionState], str | None]:
        """Up to `limit` sessions in the order they were created (or the reverse), from the
        cursor `after` (None: the first); and the cursor of the next page, None when there is
        none. A cursor this store did not make raises ValueError."""
        ...

    async def count(self, since: float | None = None) -> int:
        """Sessions kept, or those with a request at or after `since`."""
        ...

    async def expire(self, before: float) -> int:
        """Forget the sessions whose last request came before `before`; how many went."""
        ...

    async def delete(self, session: str) -> bool: ...

    async def claim(self, name: str, session: str) -> str:
        """Take trajectory `name` for `session` unless another session has; return the owner."""
        ...

    async def owner(self, name: str) -> str | None: ...

    async def put_script(self, session: str, data: bytes) -> None: ...

    async def get_script(self, session: str) -> bytes | None: ...

    async def next_sequence(self, name: str, *, at_least: int = 0) -> int:
        """An atomic counter shared by every worker: max(current, at_least) + 1."""
        ...

    async def check(self) -> None:
        """Raise if the store cannot be used (called before the server takes requests)."""
        ...

    async def close(self) -> None: ...


def open_store(url: str, *, ttl: float = 0) -> Store:
    """memory:// | sqlite:///relative/state.db | sqlite:////absolute/state.db | redis://host:port/db
    `ttl`: seconds the keys of a session live after its last request, for a store that lets them
    go on its own (Redis; 0: as long as the store lives)."""
    if url in ("memory://", "memory"):
        from proxy.store.memory import MemoryStore

        return MemoryStore()
    if url.startswith("sqlite://"):
        from pathlib import Path

        from proxy.store.sqlite import SqliteStore

        # as in SQLAlchemy: sqlite:///state.db is relative, sqlite:////var/lib/state.db absolute
        path = url.removeprefix("sqlite:///")
        if path == url or not path:
            raise ValueError(
                f"--store {url!r}: name a file, e.g. sqlite:///state.db or sqlite:////var/lib/state.db"
            )
        return SqliteStore(Path(path))
    if url.startswith(("redis://", "rediss://", "unix://")):
        from proxy.store.redis import RedisStore

        return RedisStore(url, ttl=ttl)
    raise ValueError(
        f"--store {url!r}: expected memory://, sqlite:///path/to/state.db or redis://host:port/db"
    )
