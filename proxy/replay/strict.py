"""Strict replay: every request is compared with the recorded one, and nothing goes upstream.

Main-lane requests are compared with the recorded request of their step (the step is derived from
the history, like a turn). Tool-less, subagent and other requests are matched against the
recording's exchanges of their lane, first unused match (the session's store keeps which were
used). A difference, a miss or a step beyond the recording is an error that says exactly where:
divergence is an error, not a warning.

Both sides are normalised with the run's masks and the harness's preset (proxy.replay.presets):
the values a preset captures are each side's own (its working directory, its date). A divergence's
verdict uses that same preset's masks, never another harness's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.replay.difference import Difference, first_difference, first_mismatch
from proxy.replay.normalize import normalize
from proxy.replay.presets import BY_NAME, Preset
from proxy.replay.trajectory import Recorded
from proxy.replay.volatile import Verdict, judge


@dataclass(frozen=True, slots=True)
class Miss:
    """No unused recorded exchange matches; `closest` is the nearest one, if there is any."""

    candidates: int
    closest: int | None
    difference: Difference | None
    verdict: Verdict | None = None


class StrictReplay:
    """Normalises with the run's masks; remembers each recorded request's normal form."""

    def __init__(self, masks: Sequence[re.Pattern[str]], *, presets: bool = True) -> None:
        self.masks = tuple(masks)
        self.presets = presets
        self._cache: dict[tuple[int, str | None], Any] = {}

    def preset(self, recorded: Recorded, preset: Preset | None) -> Preset | None:
        """The request's preset, else the one the recording names (a harness left unrecognised
        by its request); both sides are normalised with it."""
        if preset is None and self.presets and recorded.preset is not None:
            return BY_NAME.get(recorded.preset)
        return preset

    def normal(self, recorded: Recorded, preset: Preset | None) -> Any:
        key = (id(recorded), preset.name if preset else None)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = (recorded, self.received(recorded.request, preset))
        return found[1]

    def received(self, body: Any, preset: Preset | None) -> Any:
        masks = self.masks if preset is None else (*preset.patterns(body), *self.masks)
        return normalize(body, masks)

    def compare(
        self, recorded: Recorded, body: Any, preset: Preset | None = None
    ) -> Difference | None:
        preset = self.preset(recorded, preset)
        return first_difference(self.normal(recorded, preset), self.received(body, preset))

    def judge(self, recorded: Recorded, body: Any, preset: Preset | None = None) -> Verdict:
        preset = self.preset(recorded, preset)
        return judge(self.normal(recorded, preset), self.received(body, preset), preset=preset)

    def matching(
        self,
        side: Sequence[Recorded],
        *,
        lane: str,
        method: str,
        path: str,
        body: Any,
        preset: Preset | None = None,
    ) -> list[int]:
        """Indexes of the recorded exchanges of the lane whose request equals `body`, in order."""
        found = []
        wanted: dict[str | None, Any] = {}  # per preset: the recordings may name different ones
        for i in _candidates(side, lane, method, path):
            used = self.preset(side[i], preset)
            name = used.name if used else None
            if name not in wanted:
                wanted[name] = self.received(body, used)
            if self.normal(side[i], used) == wanted[name]:
                found.append(i)
        return found

    def closest(
        self,
        side: Sequence[Recorded],
        *,
        lane: str,
        method: str,
        path: str,
        body: Any,
        preset: Preset | None = None,
    ) -> Miss:
        candidates = _candidates(side, lane, method, path)
        if not candidates:
            return Miss(0, None, None)
        used = self.preset(side[candidates[0]], preset)
        wanted = self.received(body, used)
        text = _serialised(wanted)  # once, not once per candidate

        def shared(i: int) -> int:
            return first_mismatch(_serialised(self.normal(side[i], used)), text)

        best = max(candidates, key=shared)  # the first of the nearest
        normal = self.normal(side[best], used)
        verdict = judge(normal, wanted, preset=used)
        return Miss(len(candidates), best, first_difference(normal, wanted), verdict)


def _candidates(side: Sequence[Recorded], lane: str, method: str, path: str) -> list[int]:
    return [
        i for i, r in enumerate(side) if r.lane == lane and r.method == method and r.path == path
    ]


def _serialised(value: Any) -> bytes:
    """A normal form as text: the nearest recorded request shares the longest prefix of it."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
