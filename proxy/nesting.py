"""How deeply JSON may nest, for request bodies and trajectory files alike.

orjson writes at most 254 levels of arrays and objects (255 raise), and the Python code that walks
a value recurses once or twice a level: a value nested deeper would fail half-way through a
request (a 500, with the session's state half-written). It is refused before any of that. The
limit leaves four levels for what wraps a request when it is written out (a recording line, a
dump). orjson reads up to 1024 levels, so the check runs on what it read: writing it out once,
wrapped as deep as that, is the cheapest exact way to know (5 us for a 17 KB request, 0.2 us for a
small one).
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 250
_WRAPPING = 254 - MAX_DEPTH
TOO_DEEP = f"arrays and objects nested more than {MAX_DEPTH} levels deep (the limit is {MAX_DEPTH})"


def too_deep(value: Any) -> bool:
    """`value` (as orjson read it) nests more than MAX_DEPTH levels."""
    for _ in range(_WRAPPING):  # as deep as the deepest place it is written to
        value = [value]
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        if "Recursion" not in str(exc):
            raise
        return True
    return False


def embedded(text: str) -> Any:
    """JSON text inside a value (tool-call arguments, a tool result), as a value; None when it is
    not JSON, or nests deeper than a request may (then it is compared as the text it is: it is a
    harness's data, not a reason to refuse the request)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    # only text with that many brackets can nest that deep: most is not checked further
    if text.count("[") + text.count("{") > MAX_DEPTH and too_deep(value):
        return None
    return value


def deep_read(error: orjson.JSONDecodeError) -> bool:
    """orjson refused to read a document for its depth (over 1024 levels)."""
    return str(error).startswith("depth limit")
