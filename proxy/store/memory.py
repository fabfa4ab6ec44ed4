"""In-process session state: the default, for one worker (a sidecar, a CI job)."""

from __future__ import annotations

from collections import deque

from proxy.store.state import EVENTS_KEPT, Change, Event, EventOf, SessionState, event_for


class MemoryStore:
    def __init__(self) -> None:
        self._sessions: dict[str, SessionState] = {}
        self._owners: dict[str, str] = {}  # trajectory name -> session
        self._scripts: dict[str, bytes] = {}
        self._counters: dict[str, int] = {}
        self._events: deque[Event] = deque(maxlen=EVENTS_KEPT)

    # No await between read and write: each operation is atomic on the event loop.

    async def get(self, session: str) -> SessionState | None:
        return self._sessions.get(session)

    async def update(
        self, session: str, change: Change, *, now: float, event: Event | EventOf | None = None
    ) -> SessionState:
        state = self._sessions.get(session)
        if state is None:
            state = SessionState(id=session, created=now, last_seen=now)
        else:
            state = state.copy()  # a change that fails half-way loses nothing
        change(state)
        state.last_seen = now
        self._sessions[session] = state
        logged = event_for(event, state)
        if logged is not None:
            self._events.append(logged)
        return state

    async def events(self, limit: int = 200) -> list[Event]:
        if limit <= 0:
            return []
        return list(self._events)[-limit:]

    async def sessions(self) -> list[SessionState]:
        return list(self._sessions.values())

    async def delete(self, session: str) -> bool:
        self._scripts.pop(session, None)
        for name in [n for n, owner in self._owners.items() if owner == session]:
            del self._owners[name]
        return self._sessions.pop(session, None) is not None

    async def claim(self, name: str, session: str) -> str:
        return self._owners.setdefault(name, session)

    async def owner(self, name: str) -> str | None:
        return self._owners.get(name)

    async def put_script(self, session: str, data: bytes) -> None:
        self._scripts[session] = data

    async def get_script(self, session: str) -> bytes | None:
        return self._scripts.get(session)

    async def next_sequence(self, name: str, *, at_least: int = 0) -> int:
        value = max(self._counters.get(name, 0), at_least) + 1
        self._counters[name] = value
        return value

    async def check(self) -> None:
        return None

    async def close(self) -> None:
        return None
