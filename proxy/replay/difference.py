"""The first difference between what was expected and what came, as a JSON path plus context.

Two prompts differ by a few characters in thousands, so a report shows where and a little text
around it (20 characters before, 40 after, as the seed's Lua replay backend does), not both values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                return Difference(sub, render(expected[key]), "nothing (the key is missing)")
            if key not in expected:
                return Difference(sub, "nothing (no such key)", render(actual[key]))
            found = first_difference(expected[key], actual[key], sub)
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            i = min(len(expected), len(actual))
            exp = render(expected[i]) if i < len(expected) else f"{len(expected)} items"
            act = render(actual[i]) if i < len(actual) else f"{len(actual)} items"
            return Difference(f"{path}[{i}]", exp, act)
        return None
    if isinstance(expected, str) and isinstance(actual, str):
        if expected == actual:
            return None
        at = first_mismatch(expected, actual)
        return Difference(path, around(expected, at), around(actual, at))
    if type(expected) is type(actual) and expected == actual:
        return None
    return Difference(path, render(expected), render(actual))


def first_mismatch(a: str, b: str) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


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
