"""Parsed trajectories kept for reuse, bounded by the bytes of the files they came from.

A parsed trajectory takes about four times its file's size in memory, so the bound is set in file
bytes (--trajectory-cache-bytes). The least recently used goes first: a session that is running
uses its script on every request, so what goes is what no running session has asked for lately.
What goes is parsed again when it is asked for (an admin script from the store, a file from its
folder). The newest entry is always kept, even when it alone is over the bound. An entry is what
one file (or script) held: a file of several rollouts is one entry of all of them, counted once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

from proxy.replay.trajectory import Trajectory


class TrajectoryCache:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0  # bytes of the files of what is kept
        self.evicted = 0
        # key -> (what one file or script held, the bytes it came from)
        self._entries: OrderedDict[Hashable, tuple[tuple[Trajectory, ...], int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Trajectory | None:
        """The entry's trajectory (the first, for a file of several)."""
        found = self.get_all(key)
        return found[0] if found else None

    def get_all(self, key: Hashable) -> tuple[Trajectory, ...] | None:
        """Every trajectory of the entry, in file order."""
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(
        self, key: Hashable, trajectories: Trajectory | Sequence[Trajectory], size: int
    ) -> None:
        """Keep what one file (or script) of `size` bytes held: one trajectory, or several."""
        held = (trajectories,) if isinstance(trajectories, Trajectory) else tuple(trajectories)
        old = self._entries.pop(key, None)
        if old is not None:
            self.size -= old[1]
        self._entries[key] = (held, size)
        self.size += size
        while self.size > self.limit and len(self._entries) > 1:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.size -= dropped
            self.evicted += 1

    def report(self) -> dict[str, int]:
        return {
            "entries": len(self._entries),
            "bytes": self.size,
            "limit": self.limit,
            "evicted": self.evicted,
        }

    def files(self) -> list[Trajectory]:
        """The trajectories kept by name (files), not admin scripts."""
        return [
            t
            for key, (held, _) in self._entries.items()
            if isinstance(key, tuple) and key[0] == "file"
            for t in held
        ]
