"""Calls that come without ids, which an API may allow (the Gemini API does): the id a reading
makes up for one, from its place, and which call a result answers, by id else by name.

A made-up id starts with its API's prefix (the Api row's `made_up`), so a recording's calls read
with such ids are known not to be the harness's own, and are matched by name and arguments.
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import Any


def made_up_id(prefix: str, position: tuple[int, int], name: str) -> str:
    """The id of a call that has none: from its place (message, part) and its name, so a
    history read twice gives the same ids."""
    digest = hashlib.sha256(f"{position[0]}:{position[1]}:{name}".encode()).hexdigest()[:24]
    return prefix + digest


class Unanswered:
    """The calls whose result has not come yet. A result answers the call with its id, else the
    oldest unanswered call of its name (the result has no id, or one no call has: a client that
    got a call without an id may make one up). Found through queues by id and by
    name, not by scanning the calls per response (quadratic in a long conversation)."""

    def __init__(self) -> None:
        self._calls: dict[int, str] = {}  # the id of each unanswered call, by its order
        self._by_id: dict[str, deque[int]] = {}  # orders, oldest first; answered ones left in
        self._by_name: dict[str, deque[int]] = {}
        self._added = 0

    def add(self, name: str, ident: str) -> None:
        order = self._added
        self._added += 1
        self._calls[order] = ident
        self._by_id.setdefault(ident, deque()).append(order)
        self._by_name.setdefault(name, deque()).append(order)

    def answer(self, response: dict[str, Any]) -> str:
        """The id of the call `response` (a result with an `id` or a `name`, or both) answers,
        which is answered from now on."""
        given = response.get("id")
        name = response.get("name")
        found = self._oldest(self._by_id, given) if isinstance(given, str) and given else None
        if found is None and isinstance(name, str):
            found = self._oldest(self._by_name, name)
        if found is None:
            return given if isinstance(given, str) and given else str(name)
        return self._calls.pop(found)

    def _oldest(self, queues: dict[str, deque[int]], key: str) -> int | None:
        queue = queues.get(key)
        while queue:
            if queue[0] in self._calls:
                return queue[0]
            queue.popleft()  # answered through the other queue
        return None
