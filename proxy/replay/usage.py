"""The usage a scripted turn reports: as recorded, else an estimate.

Harnesses decide compaction and budgets from the usage they are told, and training pipelines log
and reward on it, so a replayed turn says what the recorded one cost. One model (Usage) for every
API, each of which reads its own shape into it (its Api row's `read_usage`):

    input       every input token, cached or not
    output      every output token, reasoning included
    cached      input tokens read from a cache
    cache_write input tokens written to a cache
    reasoning   output tokens spent reasoning

With nothing recorded, the estimate is about 4 characters a token: the request body's bytes for
the input, the turn's text, reasoning, tool names and arguments for the output (docs/replay.md).
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any

from proxy.replay.trajectory import Turn, Usage

CHARACTERS_PER_TOKEN = 4
STABLE_EPOCH = 1_698_796_800  # 2023-11-01T00:00:00Z
NO_USAGE = Usage(0, 0)  # a turn rendered with no usage known (renderers' default)


def usage_for(turn: Turn, request_bytes: int) -> Usage:
    """The turn's recorded usage, else the estimate."""
    if turn.usage is not None:
        return turn.usage
    written = len(turn.text) + len(turn.reasoning or "")
    written += sum(len(c.name) + len(c.arguments) for c in turn.tool_calls)
    return Usage(
        _tokens(request_bytes),
        _tokens(written),
        reasoning=_tokens(len(turn.reasoning or "")),
        estimated=True,
    )


TURN_SECONDS = 60  # between two scripted turns' made-up times


def stable_time(script: str, turn: int) -> int:
    """A `created` time for a turn whose file says none: derived from the script and the turn's
    number, so that two replays of one run give the same bytes, and later turns later times. It
    lies in 2023-11, before any run this proxy replays, so it is never taken for a real time."""
    return STABLE_EPOCH + _script_offset(script) + TURN_SECONDS * turn


@functools.lru_cache(maxsize=4096)
def _script_offset(script: str) -> int:
    return int(hashlib.sha256(script.encode()).hexdigest()[:5], 16) % 1_000_000


def _tokens(characters: int) -> int:
    return -(-characters // CHARACTERS_PER_TOKEN)  # rounded up: one character is a token


def nested(value: dict[str, Any], key: str, inner: str) -> Any:
    """`value[key][inner]`, or None where either is missing."""
    part = value.get(key)
    return part.get(inner) if isinstance(part, dict) else None


class OutOfRange(ValueError):
    """A number no real run records (a file read wrongly, or made to break a reader): every
    client reads counts and times as JSON numbers, exact only below 2^53."""


MOST = 2**53 - 1


def in_range(value: Any, what: str) -> None:
    """Refuse a number a count or a time cannot be."""
    if type(value) in (int, float) and not -MOST <= value <= MOST:
        raise OutOfRange(f"{what} is {value}, out of range for a JSON number (at most 2^53 - 1)")


def token_count(value: Any) -> int:
    """A recorded count: a non-negative integer, else 0; one no run records is refused."""
    in_range(value, "a token count")
    return value if type(value) is int and value >= 0 else 0
