"""In-process session state: the default, for one worker (a sidecar, a CI job)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import OrderedDict, deque
from collections.abc import Iterable

from proxy.store.state import EVENTS_KEPT, Change, Event, EventOf, SessionState, event_for


class MemoryStore:
    def __init__(self) -> None:
        self._sessions: dict[str, SessionState] = {}
        self._owners: dict[str, str] = {}  # trajectory name -> session
        self._claims: dict[str, set[str]] = {}  # session -> the names it owns
        self._scripts: dict[str, bytes] = {}
        self._counters: dict[str, int] = {}
        self._events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        # listing: each session's number in creation order, the sessions by number, and the
        # numbers in order (forgotten ones are taken out once they are as many as the rest, so a
        # page never walks past more forgotten sessions than there are sessions)
        self._number: dict[str, int] = {}
        self._numbered: dict[int, str] = {}
        self._order: list[int] = []
        self._forgotten = 0
        self._next = 0
        self._idle: OrderedDict[str, None] = OrderedDict()  # least recently seen first

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
        if session not in self._number:
            self._number[session] = self._next
            self._numbered[self._next] = session
            self._order.append(self._next)
            self._next += 1
        self._sessions[session] = state
        self._idle[session] = None
        self._idle.move_to_end(session)
        logged = event_for(event, state)
        if logged is not None:
            self._events.append(logged)
        return state

    async def events(self, limit: int = 200) -> list[Event]:
        if limit <= 0:
            return []
        return list(self._events)[-limit:]

    async def page(
        self, after: str | None, limit: int, *, newest_first: bool = False
    ) -> tuple[list[SessionState], str | None]:
        try:
            start = int(after) if after is not None else None
        except ValueError:
            raise ValueError(f"{str(after)[:80]!r} is not a cursor this store made") from None
        order = self._order
        if newest_first:
            at = len(order) if start is None else bisect_left(order, start)
            numbers: Iterable[int] = (order[i] for i in range(at - 1, -1, -1))
        else:
            at = 0 if start is None else bisect_right(order, start)
            numbers = (order[i] for i in range(at, len(order)))
        found: list[SessionState] = []
        last = None
        for number in numbers:
            session = self._numbered.get(number)
            if session is None:
                continue
            if len(found) == limit:
                return found, str(last)  # there is one more
            found.append(self._sessions[session])
            last = number
        return found, None

    async def count(self, since: float | None = None) -> int:
        if since is None:
            return len(self._sessions)
        count = 0
        for session in reversed(self._idle):  # most recently seen first: stops at the first older
            if self._sessions[session].last_seen < since:
                break
            count += 1
        return count

    async def expire(self, before: float) -> int:
        gone = 0
        while self._idle:
            session = next(iter(self._idle))
            if self._sessions[session].last_seen >= before:
                break
            self._forget(session)
            gone += 1
        return gone

    async def delete(self, session: str) -> bool:
        return self._forget(session)

    def _forget(self, session: str) -> bool:
        """The session, its script and its claims gone; whether there was a session."""
        known = self._sessions.pop(session, None) is not None
        self._idle.pop(session, None)
        self._scripts.pop(session, None)
        for name in self._claims.pop(session, ()):
            if self._owners.get(name) == session:
                del self._owners[name]
        number = self._number.pop(session, None)
        if number is not None:
            del self._numbered[number]
            self._forgotten += 1
            if self._forgotten * 2 > len(self._order):
                self._order = [n for n in self._order if n in self._numbered]
                self._forgotten = 0
        return known

    async def claim(self, name: str, session: str) -> str:
        owner = self._owners.setdefault(name, session)
        if owner == session:
            self._claims.setdefault(session, set()).add(name)
        return owner

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
