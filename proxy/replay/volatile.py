"""A verdict on a divergence: `volatile` (only values that change from run to run differ) or
`changed` (anything else).

A difference is volatile when masking the kinds of value below, and every harness preset's masks,
makes the two sides equal. The verdict names the masks that did it, so the user can add them; a
`changed` verdict points at the first place no mask explains, which is the one worth reading.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proxy.replay.difference import Difference, first_difference, first_mismatch, leaves, written
from proxy.replay.normalize import mask_text
from proxy.replay.presets import PRESETS

VOLATILE = "volatile"
CHANGED = "changed"
LEAVES = 2000  # differing leaves judged; past that the request has changed, whatever they are
CONTEXT = 200  # text kept around a differing stretch: what a mask's look-behind may need
MINIMISED = 1 << 18  # above this many characters of differing text, every matching mask is named

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? "


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    pattern: re.Pattern[str]


def _kind(name: str, pattern: str) -> Kind:
    return Kind(name, re.compile(pattern))


KINDS: tuple[Kind, ...] = (
    _kind(
        "a timestamp",
        r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?",
    ),
    _kind("a date", r"\b\d{4}-\d\d-\d\d\b"),
    _kind("a written date", rf"\b(?:{_DAY})?{_MONTH} \d{{1,2}},? \d{{4}}\b|\b{_MONTH} \d{{4}}\b"),
    _kind("a time of day", r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b"),
    _kind("a uuid", r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"),
    _kind(
        "a path under a temporary folder",
        r"(?:/private)?(?:/tmp|/var/tmp|/var/folders)/[^\s\"'`<>()\[\]{},;]*",
    ),
    _kind("a local port", r"\b(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):\d{2,5}\b"),
    _kind("a hex id", r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,64}\b"),
)


def _candidates() -> tuple[Kind, ...]:
    """The presets' masks first (they are precise), then the general kinds."""
    seen: set[str] = set()
    out: list[Kind] = []
    for preset in PRESETS:
        for rule in preset.masks:
            if rule.pattern.pattern not in seen:
                seen.add(rule.pattern.pattern)
                out.append(Kind(f"{rule.what} ({preset.title})", rule.pattern))
    return (*out, *KINDS)


CANDIDATES = _candidates()


@dataclass(frozen=True, slots=True)
class Verdict:
    verdict: str  # volatile | changed
    masks: tuple[Kind, ...] = ()  # volatile: the masks that explain it
    changed_at: Difference | None = None  # changed: the first difference no mask explains

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict}
        if self.masks:
            out["masks"] = [{"what": k.name, "mask": k.pattern.pattern} for k in self.masks]
        return out


CHANGED_VERDICT = Verdict(CHANGED)


def judge(expected: Any, actual: Any, *, path: str = "") -> Verdict:
    """Whether `expected` and `actual` (JSON values, already normalised) differ only in values
    that change between runs. `path` is where they sit, for `changed_at`."""
    pairs = []
    for n, (trail, a, b) in enumerate(leaves(expected, actual)):
        if n == LEAVES:
            return CHANGED_VERDICT
        pairs.append((trail, a, b))
    if not pairs:
        return CHANGED_VERDICT  # equal: nothing volatile about it (a caller's mistake)
    everything = tuple(k.pattern for k in CANDIDATES)
    stretches: list[tuple[str, str]] = []
    for trail, a, b in pairs:
        if not (isinstance(a, str) and isinstance(b, str)):
            return Verdict(CHANGED, changed_at=first_difference(a, b, written(path, trail)))
        a, b = _stretch(a, b)
        masked_a, masked_b = _masked(a, everything), _masked(b, everything)
        if masked_a != masked_b:
            return Verdict(
                CHANGED, changed_at=first_difference(masked_a, masked_b, written(path, trail))
            )
        stretches.append((a, b))
    if sum(len(a) + len(b) for a, b in stretches) > MINIMISED:
        return Verdict(VOLATILE, tuple(k for k in CANDIDATES if _matches(k, stretches)))
    # the fewest masks that still explain every pair: drop each one that is not needed
    needed = [k for k in CANDIDATES if _matches(k, stretches)]
    for kind in reversed(needed.copy()):  # the general kinds go first: a preset's is more exact
        rest = tuple(k.pattern for k in needed if k is not kind)
        if all(_masked(a, rest) == _masked(b, rest) for a, b in stretches):
            needed.remove(kind)
    return Verdict(VOLATILE, tuple(needed))


def _stretch(a: str, b: str) -> tuple[str, str]:
    """The part of each text from just before the first difference to just after the last one,
    so a long prompt that differs in one date is not masked over and over."""
    start = first_mismatch(a, b)
    tail = first_mismatch(a[start:][::-1], b[start:][::-1])
    lo = max(0, start - CONTEXT)
    return a[lo : len(a) - tail + CONTEXT], b[lo : len(b) - tail + CONTEXT]


def _matches(kind: Kind, stretches: Sequence[tuple[str, str]]) -> bool:
    return any(kind.pattern.search(a) or kind.pattern.search(b) for a, b in stretches)


def _masked(text: str, patterns: Sequence[re.Pattern[str]]) -> str:
    return mask_text(text, patterns)
