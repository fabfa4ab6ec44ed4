"""The first difference between what was expected and what came, as a JSON path plus context.

Two prompts differ by a few characters in thousands, so a report shows where and a little text
around it (20 characters before, 40 after, as the seed's Lua replay backend does), not both values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, AnyStr

import orjson

BEFORE = 20
AFTER = 40
WINDOW = 600  # text kept on each side of a differing stretch, for the status page to draw
STRETCH = 1200  # of the differing stretch itself


@dataclass(frozen=True, slots=True)
class Excerpt:
    """Part of a text that differs: `text` starts at `offset` in the whole text, and the stretch
    that differs is text[start:end]."""

    text: str
    start: int
    end: int
    offset: int

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "start": self.start, "end": self.end, "offset": self.offset}


@dataclass(frozen=True, slots=True)
class Difference:
    path: str
    expected: str  # a short rendering of the expected value around the difference
    actual: str
    # both texts around the stretch that differs, when the difference is between two texts
    excerpts: tuple[Excerpt, Excerpt] | None = field(default=None, compare=False)

    def describe(self) -> str:
        return f"{self.path or '$'}: expected {self.expected}, got {self.actual}"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "expected": self.expected, "actual": self.actual}
        if self.excerpts is not None:
            expected, actual = self.excerpts
            out["excerpts"] = {"expected": expected.as_dict(), "actual": actual.as_dict()}
        return out


def excerpts(a: str, b: str) -> tuple[Excerpt, Excerpt]:
    """The two texts around the stretch where they differ: from the first differing character to
    the last (found from the end), with some text on either side."""
    start = first_mismatch(a, b)
    tail = first_mismatch(a[start:][::-1], b[start:][::-1])
    while start > 0 and a[start - 1].isalnum():  # whole words: "2026" against "2027", not "6"
        start -= 1
    return _excerpt(a, start, len(a) - tail), _excerpt(b, start, len(b) - tail)


def _excerpt(text: str, start: int, end: int) -> Excerpt:
    limit = min(len(text), end + STRETCH)
    while end < limit and text[end].isalnum():
        end += 1
    end = min(end, start + STRETCH)
    lo, hi = max(0, start - WINDOW), min(len(text), end + WINDOW)
    return Excerpt(text[lo:hi], start - lo, end - lo, lo)


def first_difference(expected: Any, actual: Any, path: str = "") -> Difference | None:
    """None when equal. Objects compare key by key in sorted order, arrays item by item."""
    # the keys and indexes down to the difference: its path is written out only once found, not
    # one string per value compared (each as long as the value is deep)
    trail: list[str | int] = []
    found = _first(expected, actual, trail)
    if found is None:
        return None
    shown, texts = found
    sides = excerpts(*texts) if texts is not None else None
    return Difference(written(path, trail), *shown, sides)


Found = tuple[tuple[str, str], tuple[str, str] | None]


def _first(expected: Any, actual: Any, trail: list[str | int]) -> Found | None:
    """(expected, actual) as shown at the first difference, whose place `trail` is left holding,
    and the two texts when that difference is between texts."""
    if expected is actual:  # a history's items the session's earlier requests compared already
        return None
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            trail.append(str(key))
            if key not in actual:
                return (render(expected[key]), "nothing (the key is missing)"), None
            if key not in expected:
                return ("nothing (no such key)", render(actual[key])), None
            found = _first(expected[key], actual[key], trail)
            if found is not None:
                return found
            trail.pop()
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
            trail.append(i)
            found = _first(a, b, trail)
            if found is not None:
                return found
            trail.pop()
        if len(expected) != len(actual):
            i = min(len(expected), len(actual))
            trail.append(i)
            exp = render(expected[i]) if i < len(expected) else f"{len(expected)} items"
            act = render(actual[i]) if i < len(actual) else f"{len(actual)} items"
            return (exp, act), None
        return None
    if isinstance(expected, str) and isinstance(actual, str):
        if expected == actual:
            return None
        at = first_mismatch(expected, actual)
        return (around(expected, at), around(actual, at)), (expected, actual)
    if type(expected) is type(actual) and expected == actual:
        return None
    return (render(expected), render(actual)), None


def written(path: str, trail: Sequence[str | int]) -> str:
    """`path` followed by the trail: .key (no dot while nothing is written yet), [index]."""
    parts = [path]
    started = bool(path)
    for part in trail:
        if isinstance(part, int):
            parts.append(f"[{part}]")
            started = True
        else:
            parts.append(f".{part}" if started else part)
            started = started or bool(part)
    return "".join(parts)


def leaves(
    expected: Any, actual: Any, trail: list[str | int] | None = None
) -> Iterator[tuple[tuple[str | int, ...], Any, Any]]:
    """Every place the two differ, in the order first_difference looks: (trail, expected, actual)
    for each differing leaf, a key on one side only, or a list's extra items (as counts)."""
    trail = [] if trail is None else trail
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            trail.append(str(key))
            if key not in actual or key not in expected:
                yield tuple(trail), expected.get(key), actual.get(key)
            else:
                yield from leaves(expected[key], actual[key], trail)
            trail.pop()
    elif isinstance(expected, list) and isinstance(actual, list):
        for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
            trail.append(i)
            yield from leaves(a, b, trail)
            trail.pop()
        if len(expected) != len(actual):
            trail.append(min(len(expected), len(actual)))
            yield tuple(trail), len(expected), len(actual)
            trail.pop()
    elif not (type(expected) is type(actual) and expected == actual):
        yield tuple(trail), expected, actual


def first_mismatch(a: AnyStr, b: AnyStr) -> int:
    """Where two texts (or byte strings) first differ: the shorter one's length if it starts the
    other. Slices are compared (memcmp), not characters in a Python loop: the lower half of the
    part that differs each time, so about 3n characters are copied in all."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], and they differ within [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def around(text: str, at: int) -> str:
    """The text near position `at`, quoted, with newlines shown as \\n."""
    start = max(0, at - BEFORE)
    piece = text[start : at + AFTER].replace("\n", "\\n")
    lead = "..." if start > 0 else ""
    tail = "..." if at + AFTER < len(text) else ""
    return f'{lead}"{piece}"{tail} (at character {at})'


def render(value: Any, limit: int = BEFORE + AFTER) -> str:
    text = orjson.dumps(value).decode() if not isinstance(value, str) else f'"{value}"'
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "..."
