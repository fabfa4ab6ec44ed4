"""A verdict on a divergence: `volatile` (only values that change from run to run differ) or
`changed` (anything else).

A difference is volatile when, at every place the two sides differ, a value of one of the kinds
below (or of the request's own preset's masks) stands on both sides at that same place, and the
text around those values is equal. The kinds match values, never arbitrary text: a path has no
`..` segment and no shell metacharacter, a local port is one the system hands out, a preset's
header mask covers the header's value and nothing after it. Whatever differs around a value is
compared as it is, so `rm -rf /tmp/build` against `rm -rf /tmp/../../home` stays changed.

Never volatile, whatever the kinds say: a difference inside a tool call (its arguments are the
commands the run executes), a difference that is not between two texts, and more differing places
than a verdict looks at (DIFFERENCES): past that bound the answer is `changed`, the safe one.

The search is bounded so a verdict costs about the same whatever the input: each differing place
is searched in a window of WINDOW characters either side, at most DIFFERENCES places in all. The
equal stretches between them are compared with memcmp, not with the masks.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.replay.difference import Difference, first_difference, first_mismatch, leaves, written
from proxy.replay.normalize import KEEP, MASK
from proxy.replay.presets import Preset

VOLATILE = "volatile"
CHANGED = "changed"
DIFFERENCES = 16  # differing places judged per verdict; past that the request has changed
WINDOW = 128  # characters searched either side of a differing place: longer than any value kind

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? "
# a path segment: no shell metacharacter (| & ; $ ` ( ) < > quotes, globs, braces, spaces), and
# not `.` or `..`, which would walk out of the temporary folder
_SEGMENT = r"(?!\.\.?(?![\w.@%+=~-]))[\w.@%+=~-]+"
# the ports a system hands out to a server bound to port 0 (Linux from 32768, others from 49152):
# a test server's port, which is another one every run. A port below names a service someone
# chose (5432, 8080): another one there addresses another service.
_EPHEMERAL = (
    r"(?:3276[89]|327[7-9]\d|32[89]\d\d|3[3-9]\d{3}|[45]\d{4}|6[0-4]\d{3}|65[0-4]\d\d|655[0-2]\d"
    r"|6553[0-5])"
)
# where a tool call sits in a request of each API, or in a recording's answer: what is under
# them is the command the run executes
CALL_KEYS = frozenset({"tool_calls", "function_call", "functionCall", "arguments"})
CALL_TYPES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


@dataclass(frozen=True, slots=True)
class ValueKind:
    name: str
    pattern: re.Pattern[str]


def _kind(name: str, pattern: str) -> ValueKind:
    return ValueKind(name, re.compile(pattern))


KINDS: tuple[ValueKind, ...] = (
    _kind(
        "a timestamp",
        r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?",
    ),
    _kind("a date", r"\b\d{4}-\d\d-\d\d\b"),
    _kind(
        "a written date",
        rf"\b(?:{_DAY})?{_MONTH} \d{{1,2}},? \d{{4}}\b|\b\d{{1,2}} {_MONTH},? \d{{4}}\b"
        rf"|\b{_MONTH} \d{{4}}\b",
    ),
    _kind("a time of day", r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b"),
    _kind("a uuid", r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"),
    _kind(
        "a path under a temporary folder",
        rf"(?<![\w.~/-])(?:/private)?(?:/tmp|/var/tmp|/var/folders)(?:/{_SEGMENT})+",
    ),
    _kind(
        "a local port",
        rf"(?P<{KEEP}>(?<![\w.])(?:127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):){_EPHEMERAL}(?!\d)",
    ),
    _kind("a hex id", r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{6,64}\b"),
)


@functools.cache
def candidates(preset: Preset | None) -> tuple[ValueKind, ...]:
    """The request's own preset's masks first (they are precise), then the general kinds. Never
    another harness's: its masks were written against words this harness does not send."""
    if preset is None:
        return KINDS
    own = tuple(ValueKind(f"{rule.what} ({preset.title})", rule.pattern) for rule in preset.masks)
    return (*own, *KINDS)


def mask_flags(patterns: Iterable[str]) -> str:
    """Patterns as `--mask` flags a shell reads back as they are (a pattern may hold a quote)."""
    return " ".join(f"--mask {shlex.quote(p)}" for p in patterns)


@dataclass(frozen=True, slots=True)
class Verdict:
    verdict: str  # volatile | changed
    masks: tuple[ValueKind, ...] = ()  # volatile: the masks that explain it
    changed_at: Difference | None = None  # changed: the first difference no mask explains
    # characters the masks were searched in: what the verdict cost, bounded whatever the input
    searched: int = field(default=0, compare=False)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict}
        if self.masks:
            out["masks"] = [{"what": k.name, "mask": k.pattern.pattern} for k in self.masks]
        return out

    def flags(self) -> str:
        return mask_flags(k.pattern.pattern for k in self.masks)


CHANGED_VERDICT = Verdict(CHANGED)


@dataclass(slots=True)
class _Search:
    """What one verdict has used so far, across the differing texts it looks at."""

    places: int = 0
    searched: int = 0
    used: dict[str, ValueKind] = field(default_factory=dict)


def judge(expected: Any, actual: Any, *, path: str = "", preset: Preset | None = None) -> Verdict:
    """Whether `expected` and `actual` (JSON values, already normalised) differ only in values
    that change between runs. `path` is where they sit, for `changed_at`; `preset` the request's
    own harness preset, whose masks are tried first."""
    kinds = candidates(preset)
    search = _Search()
    seen = False
    for trail, a, b in leaves(expected, actual):
        seen = True
        where = written(path, trail)
        if search.places >= DIFFERENCES:
            return _changed(first_difference(a, b, where), search)
        if not (isinstance(a, str) and isinstance(b, str)) or in_call(expected, actual, trail):
            return _changed(first_difference(a, b, where), search)
        left = _walk(a, b, kinds, search)
        if left is not None:
            return _changed(first_difference(*left, where), search)
    if not seen:
        return CHANGED_VERDICT  # equal: nothing volatile about it (a caller's mistake)
    return Verdict(VOLATILE, tuple(search.used.values()), searched=search.searched)


def _changed(at: Difference | None, search: _Search) -> Verdict:
    return Verdict(CHANGED, changed_at=at, searched=search.searched)


def in_call(expected: Any, actual: Any, trail: Sequence[str | int]) -> bool:
    """Whether the place `trail` leads to is inside a tool call on either side: a chat
    `tool_calls` list, a Responses `*_call` item, an Anthropic `tool_use` block, a Gemini
    `functionCall`, or any `arguments`."""
    return _in_call(expected, trail) or _in_call(actual, trail)


def _in_call(value: Any, trail: Sequence[str | int]) -> bool:
    node = value
    for step in trail:
        if isinstance(node, dict):
            kind = node.get("type")
            if isinstance(kind, str) and (kind.endswith("_call") or kind in CALL_TYPES):
                return True
            if step in CALL_KEYS or step not in node:
                return step in CALL_KEYS
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and step < len(node):
            node = node[step]
        else:
            return False
    return False


def _walk(a: str, b: str, kinds: Sequence[ValueKind], search: _Search) -> tuple[str, str] | None:
    """None when every place a and b differ holds a value of one of `kinds` on both sides, at the
    same offset; else both texts with the values explained so far masked, so their first
    difference is the first one no kind explains (or the one past the bound)."""
    i = j = 0
    masked_a: list[str] = []
    masked_b: list[str] = []
    while True:
        k = common(a, i, b, j)
        pa, pb = i + k, j + k
        if pa == len(a) and pb == len(b):
            return None
        covered = None
        if search.places < DIFFERENCES:
            search.places += 1
            covered = _covered(kinds, a, pa, b, pb, search)
        if covered is None or covered[1][0] < i or covered[2][0] < j:
            return "".join((*masked_a, a[i:])), "".join((*masked_b, b[j:]))
        kind, (sa, ea), (sb, eb) = covered
        search.used.setdefault(kind.pattern.pattern, kind)
        masked_a += (a[i:sa], MASK)
        masked_b += (b[j:sb], MASK)
        i, j = ea, eb


def _covered(
    kinds: Sequence[ValueKind], a: str, pa: int, b: str, pb: int, search: _Search
) -> tuple[ValueKind, tuple[int, int], tuple[int, int]] | None:
    """The first kind with a value on both sides at the differing place: its masked span in a
    and in b."""
    for kind in kinds:
        found = cover(kind.pattern, a, pa, b, pb)
        search.searched += _window(a, pa) + _window(b, pb)
        if found is not None:
            return kind, *found
    return None


def cover(
    pattern: re.Pattern[str], a: str, pa: int, b: str, pb: int
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The spans `pattern` masks in a and in b when both hold a match of it over their first
    difference (at pa in a, pb in b), the difference at the same offset into each: the value
    differs, and nothing around it."""
    span_a = _span(pattern, a, pa)
    span_b = _span(pattern, b, pb) if span_a is not None else None
    if span_a is None or span_b is None:
        return None
    if pa - span_a[0] != pb - span_b[0]:
        return None
    if span_a[1] == pa and span_b[1] == pb:
        return None  # both values end before the difference: it is not in them
    return span_a, span_b


def _span(pattern: re.Pattern[str], text: str, at: int) -> tuple[int, int] | None:
    """The span a match of `pattern` masks (all but its `keep` group) that holds position `at`
    (or ends there), searched only in the window around it."""
    keep = KEEP in pattern.groupindex
    lo, hi = max(0, at - WINDOW), min(len(text), at + WINDOW)
    for match in pattern.finditer(text, lo, hi):
        if match.start() > at:
            break
        start = match.end(KEEP) if keep and match.start(KEEP) >= 0 else match.start()
        if start <= at <= match.end() and start < match.end():
            return start, match.end()
    return None


def _window(text: str, at: int) -> int:
    return min(len(text), at + WINDOW) - max(0, at - WINDOW)


def common(a: str, i: int, b: str, j: int) -> int:
    """How many characters a[i:] and b[j:] share at their start, in chunks that double: the cost
    is the length of the shared stretch, not of the texts."""
    n = min(len(a) - i, len(b) - j)
    done, chunk = 0, 64
    while done < n:
        size = min(chunk, n - done)
        x, y = a[i + done : i + done + size], b[j + done : j + done + size]
        if x != y:
            return done + first_mismatch(x, y)
        done += size
        chunk *= 2
    return n
