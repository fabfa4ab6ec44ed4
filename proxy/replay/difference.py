"""The first difference between what was expected and what came, as a JSON path plus context.

Two prompts differ by a few characters in thousands, so a report shows where and a little text
around it (20 characters before, 40 after, as the seed's Lua replay backend does), not both values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, AnyStr

import orjson

BEFORE = 20
AFTER = 40


@dataclass(frozen=True, slots=True)
class Difference:
    path: str
    expected: str  # a short rendering of the expected value around the difference
    actual: str

    def describe(self) -> str:
        return f"{self.path or '$'}: expected {self.expected}, got {self.actual}"

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "expected": self.expected, "actual": self.actual}


def first_difference(expected: Any, actual: Any, path: str = "") -> Difference | None:
    """None when equal. Objects compare key by key in sorted order, arrays item by item."""
    # the keys and indexes down to the difference: its path is written out only once found, not
    # one string per value compared (each as long as the value is deep)
    trail: list[str | int] = []
    found = _first(expected, actual, trail)
    if found is None:
        return None
    return Difference(_written(path, trail), *found)


def _first(expected: Any, actual: Any, trail: list[str | int]) -> tuple[str, str] | None:
    """(expected, actual) as shown at the first difference, whose place `trail` is left holding."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            trail.append(str(key))
            if key not in actual:
                return render(expected[key]), "nothing (the key is missing)"
            if key not in expected:
                return "nothing (no such key)", render(actual[key])
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
            return exp, act
        return None
    if isinstance(expected, str) and isinstance(actual, str):
        if expected == actual:
            return None
        at = first_mismatch(expected, actual)
        return around(expected, at), around(actual, at)
    if type(expected) is type(actual) and expected == actual:
        return None
    return render(expected), render(actual)


def _written(path: str, trail: list[str | int]) -> str:
    """`path` followed by the trail: .key (no dot while nothing is written yet), [index]."""
    parts = [path]
    written = bool(path)
    for part in trail:
        if isinstance(part, int):
            parts.append(f"[{part}]")
            written = True
        else:
            parts.append(f".{part}" if written else part)
            written = written or bool(part)
    return "".join(parts)


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
