"""Session state behind one small interface; the backend is chosen by --store URL.

Every operation is atomic per session: `update` applies a change to the current state as one
step, so concurrent requests of one session never lose each other's counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from proxy.store.state import SessionState

__all__ = ["SessionState", "Store", "open_store"]

Change = Callable[[SessionState], None]


class Store(Protocol):
    async def get(self, session: str) -> SessionState | None: ...

    async def update(self, session: str, change: Change, *, now: float) -> SessionState:
        """Apply `change` to the session's state (created if missing) atomically."""
        ...

    async def sessions(self) -> list[SessionState]: ...

    async def delete(self, session: str) -> bool: ...

    async def claim(self, name: str, session: str) -> str:
        """Take trajectory `name` for `session` unless another session has; return the owner."""
        ...

    async def owner(self, name: str) -> str | None: ...

    async def put_script(self, session: str, data: bytes) -> None: ...

    async def get_script(self, session: str) -> bytes | None: ...

    async def close(self) -> None: ...


def open_store(url: str) -> Store:
    from proxy.store.memory import MemoryStore

    if url in ("memory://", "memory"):
        return MemoryStore()
    raise ValueError(f"unsupported --store {url!r}: this build supports memory://")
