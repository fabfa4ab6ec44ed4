"""Strict replay: every request is compared with the recorded one, and nothing goes upstream.

Main-lane requests are compared with the recorded request of their step (the step is derived from
the history, like a turn). Tool-less, subagent and other requests are matched against the
recording's exchanges of their lane, first unused match (the session's store keeps which were
used). A difference, a miss or a step beyond the recording is an error that says exactly where:
divergence is an error, not a warning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.replay.difference import Difference, first_difference, first_mismatch
from proxy.replay.normalize import normalize
from proxy.replay.trajectory import Recorded


@dataclass(frozen=True, slots=True)
class Miss:
    """No unused recorded exchange matches; `closest` is the nearest one, if there is any."""

    candidates: int
    closest: int | None
    difference: Difference | None


class StrictReplay:
    """Normalises with the run's masks; remembers each recorded request's normal form."""

    def __init__(self, masks: Sequence[re.Pattern[str]]) -> None:
        self.masks = tuple(masks)
        self._cache: dict[int, Any] = {}

    def normal(self, recorded: Recorded) -> Any:
        key = id(recorded)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = (recorded, normalize(recorded.request, self.masks))
        return found[1]

    def compare(self, recorded: Recorded, body: Any) -> Difference | None:
        return first_difference(self.normal(recorded), normalize(body, self.masks))

    def matching(
        self, side: Sequence[Recorded], *, lane: str, method: str, path: str, body: Any
    ) -> list[int]:
        """Indexes of the recorded exchanges of the lane whose request equals `body`, in order."""
        wanted = normalize(body, self.masks)
        return [i for i in _candidates(side, lane, method, path) if self.normal(side[i]) == wanted]

    def closest(
        self, side: Sequence[Recorded], *, lane: str, method: str, path: str, body: Any
    ) -> Miss:
        candidates = _candidates(side, lane, method, path)
        if not candidates:
            return Miss(0, None, None)
        wanted = normalize(body, self.masks)
        text = _serialised(wanted)  # once, not once per candidate

        def shared(i: int) -> int:
            return first_mismatch(_serialised(self.normal(side[i])), text)

        best = max(candidates, key=shared)  # the first of the nearest
        return Miss(len(candidates), best, first_difference(self.normal(side[best]), wanted))


def _candidates(side: Sequence[Recorded], lane: str, method: str, path: str) -> list[int]:
    return [
        i for i, r in enumerate(side) if r.lane == lane and r.method == method and r.path == path
    ]


def _serialised(value: Any) -> bytes:
    """A normal form as text: the nearest recorded request shares the longest prefix of it."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
