"""Strict replay: every request is compared with the recorded one, and nothing goes upstream.

Main-lane requests are compared with the recorded request of their step (the step is derived from
the history, like a turn). Tool-less, subagent and other requests are matched against the
recording's exchanges of their lane, first unused match (the session's store keeps which were
used). A difference, a miss or a step beyond the recording is an error that says exactly where:
divergence is an error, not a warning.

Both sides are normalised with the run's masks and the harness's preset (proxy.replay.presets):
the values a preset captures are each side's own (its working directory, its date). A divergence's
verdict uses that same preset's masks, never another harness's.

Each recorded request's normal form is kept for the next request of its step, bounded by bytes (the
--trajectory-cache-bytes limit), least recently used first: reloaded recordings are new objects,
and their forms would otherwise pile up for as long as the proxy runs.

A main-lane step is compared from what the session's previous step left (`compare(session=)`):
every request of a long run repeats the whole history, so each side's items whose text is
unchanged keep their normal forms, and the items the previous step found equal are the same
objects on both sides, which the comparison passes over. Only the new items are walked: the
verdict is the one a comparison from scratch gives. What sessions left is bounded by the same
number of bytes, apart from the recorded forms, least recently used first.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.replay.difference import Difference, first_difference, first_mismatch
from proxy.replay.normalize import (
    NO_FIELDS,
    Canonical,
    Fields,
    Normalised,
    normalize,
    normalize_body,
    seen_since,
)
from proxy.replay.presets import PRESET_BY_NAME, Found, Preset
from proxy.replay.trajectory import Recorded
from proxy.replay.volatile import Verdict, judge


@dataclass(frozen=True, slots=True)
class Miss:
    """No unused recorded exchange matches; `closest` is the nearest one, if there is any."""

    candidates: int
    closest: int | None
    difference: Difference | None
    verdict: Verdict | None = None


CACHE_BYTES = 256 * 1024 * 1024  # as --trajectory-cache-bytes' default

_Key = tuple[int, str | None]


@dataclass(frozen=True, slots=True)
class _Side:
    """One side of a compared step: its normal form, and where its preset's values were found."""

    form: Normalised
    found: Found | None

    @property
    def size(self) -> int:
        return self.form.size


@dataclass(frozen=True, slots=True)
class _Step:
    """What a session's last compared step leaves for its next: both sides."""

    recorded: _Side
    received: _Side


class StrictReplay:
    """Normalises with the run's masks and the APIs' id and dropped fields; remembers recorded
    requests' normal forms, up to `cache_bytes` of them (as serialised), the least recently used
    going first."""

    def __init__(
        self,
        masks: Sequence[re.Pattern[str]],
        *,
        fields: Fields = NO_FIELDS,
        presets: bool = True,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self.masks = tuple(masks)
        self.fields = fields
        self.presets = presets
        self.cache_bytes = cache_bytes
        self.cached = 0  # bytes of the normal forms kept
        # the Recorded is kept with its form: while it lives, no other object has its id
        self._cache: OrderedDict[_Key, tuple[Recorded, Any, bytes]] = OrderedDict()
        self.stepped = 0  # bytes of the sessions' last steps kept
        self._steps: OrderedDict[str, _Step] = OrderedDict()
        self._lock = threading.Lock()

    def preset(self, recorded: Recorded, preset: Preset | None) -> Preset | None:
        """The request's preset, else the one the recording names (a harness left unrecognised
        by its request); both sides are normalised with it."""
        if preset is None and self.presets and recorded.preset is not None:
            return PRESET_BY_NAME.get(recorded.preset)
        return preset

    def normal(self, recorded: Recorded, preset: Preset | None) -> Any:
        return self._form(recorded, preset)[1]

    def _form(self, recorded: Recorded, preset: Preset | None) -> tuple[Recorded, Any, bytes]:
        """The recorded request's normal form, and that form as text (what `closest` compares),
        each made once while it is kept."""
        key = (id(recorded), preset.name if preset else None)
        with self._lock:  # decisions on large bodies run in threads
            found = self._cache.get(key)
            if found is not None and found[0] is recorded:
                self._cache.move_to_end(key)
                return found
        normal = self.received(recorded.request, preset)
        entry = (recorded, normal, _serialised(normal))
        self._keep(key, entry)
        return entry

    def _keep(self, key: _Key, entry: tuple[Recorded, Any, bytes]) -> None:
        """The newest is always kept, even alone over the bound: the step's next request (its
        verdict, a retry) reads it again at once."""
        with self._lock:
            old = self._cache.pop(key, None)
            self.cached += len(entry[2]) - (len(old[2]) if old is not None else 0)
            self._cache[key] = entry
            while self.cached > self.cache_bytes and len(self._cache) > 1:
                _, (_, _, text) = self._cache.popitem(last=False)
                self.cached -= len(text)

    def cache_report(self) -> dict[str, int]:
        return {
            "entries": len(self._cache),
            "bytes": self.cached,
            "limit": self.cache_bytes,
            "sessions": len(self._steps),
            "session_bytes": self.stepped,
        }

    def received(self, body: Any, preset: Preset | None) -> Any:
        masks, canonical = self._rules(body, preset)
        return normalize(body, masks, canonical=canonical, fields=self.fields)

    def _rules(
        self, body: Any, preset: Preset | None, found: Found | None = None
    ) -> tuple[tuple[re.Pattern[str], ...], Canonical | None]:
        """The masks (the values the body states first, for its preset; `found`: where they
        were found, when known) and the list order."""
        if preset is None:
            return self.masks, None
        masks = (*preset.patterns(body, found), *self.masks)
        return masks, preset.canonical if preset.orders else None

    def compare(
        self,
        recorded: Recorded,
        body: Any,
        preset: Preset | None = None,
        *,
        session: str | None = None,
    ) -> Difference | None:
        """The first difference of `body` from the recorded request. `session`: the requests of
        one session's main lane, compared one step after another, walk only what is new."""
        preset = self.preset(recorded, preset)
        then = recorded.request
        if session is None or not isinstance(then, dict) or not isinstance(body, dict):
            return first_difference(self.normal(recorded, preset), self.received(body, preset))
        with self._lock:
            last = self._steps.get(session)
        old = self._side(then, preset, last.recorded if last else None, shared=True)
        new = self._side(body, preset, last.received if last else None, shared=False)
        difference = first_difference(old.form.value, new.form.value)
        if difference is None:  # equal: the next step finds these items identical on both sides
            old = _Side(old.form.sharing(new.form), old.found)
        self._step(session, _Step(old, new))
        return difference

    def _side(
        self, body: dict[str, Any], preset: Preset | None, last: _Side | None, *, shared: bool
    ) -> _Side:
        """One side of a step, from that side of the step before. `shared`: a recorded request,
        whose history items its recording holds once."""
        since = last.form if last is not None else None
        seen = seen_since(body, since, shared=shared, fields=self.fields)
        found = None
        if preset is not None:
            found = preset.values_since(body, seen.same, last.found if last is not None else None)
        masks, canonical = self._rules(body, preset, found)
        form = normalize_body(
            body, masks, canonical=canonical, since=since, seen=seen, fields=self.fields
        )
        return _Side(form, found)

    def _step(self, session: str, step: _Step) -> None:
        """The session's newest step is kept, even alone over the bound: its next one reads it."""
        size = step.recorded.size + step.received.size
        with self._lock:
            old = self._steps.pop(session, None)
            if old is not None:
                self.stepped -= old.recorded.size + old.received.size
            self._steps[session] = step
            self.stepped += size
            while self.stepped > self.cache_bytes and len(self._steps) > 1:
                _, gone = self._steps.popitem(last=False)
                self.stepped -= gone.recorded.size + gone.received.size

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

        def shared(i: int) -> int:  # each candidate's text is kept with its form
            return first_mismatch(self._form(side[i], used)[2], text)

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
