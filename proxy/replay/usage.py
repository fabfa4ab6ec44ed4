"""The usage a scripted turn reports: as recorded, read from whichever API's shape it was written
in, else an estimate.

Harnesses decide compaction and budgets from the usage they are told, and training pipelines log
and reward on it, so a replayed turn says what the recorded one cost. One model for the four APIs:

    input       every input token, cached or not (OpenAI prompt_tokens, Responses input_tokens,
                Anthropic input + cache read + cache write, Gemini promptTokenCount)
    output      every output token, reasoning included
    cached      input tokens read from a cache
    cache_write input tokens written to a cache (Anthropic)
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


def read_usage(value: Any) -> Usage | None:
    """Usage written in any of the APIs' shapes (and Codex's token counts, opencode's step
    tokens); None when `value` is none of them or holds no counts."""
    if not isinstance(value, dict):
        return None
    cache = value.get("cache")
    if isinstance(cache, dict) and "input" in value:  # opencode's step tokens: all apart
        read, written = _int(cache.get("read")), _int(cache.get("write"))
        reasoning = _int(value.get("reasoning"))
        return Usage(
            _int(value.get("input")) + read + written,
            _int(value.get("output")) + reasoning,
            read,
            written,
            reasoning,
        )
    if "promptTokenCount" in value or "candidatesTokenCount" in value:  # Gemini
        thoughts = _int(value.get("thoughtsTokenCount"))
        return Usage(
            _int(value.get("promptTokenCount")),
            _int(value.get("candidatesTokenCount")) + thoughts,
            _int(value.get("cachedContentTokenCount")),
            0,
            thoughts,
        )
    if "prompt_tokens" in value or "completion_tokens" in value:  # Chat Completions
        return Usage(
            _int(value.get("prompt_tokens")),
            _int(value.get("completion_tokens")),
            _int(_get(value, "prompt_tokens_details", "cached_tokens")),
            0,
            _int(_get(value, "completion_tokens_details", "reasoning_tokens")),
        )
    if "input_tokens" not in value and "output_tokens" not in value:
        return None
    if "cache_read_input_tokens" in value or "cache_creation_input_tokens" in value:  # Anthropic
        read = _int(value.get("cache_read_input_tokens"))
        written = _int(value.get("cache_creation_input_tokens"))
        return Usage(
            _int(value.get("input_tokens")) + read + written,
            _int(value.get("output_tokens")),
            read,
            written,
        )
    return Usage(  # Responses, and Codex's token counts (cached_input_tokens, reasoning_output_...)
        _int(value.get("input_tokens")),
        _int(value.get("output_tokens")),
        _int(
            _get(value, "input_tokens_details", "cached_tokens") or value.get("cached_input_tokens")
        ),
        _int(value.get("cache_write_input_tokens")),
        _int(
            _get(value, "output_tokens_details", "reasoning_tokens")
            or value.get("reasoning_output_tokens")
        ),
    )


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


def _get(value: dict[str, Any], key: str, inner: str) -> Any:
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


def _int(value: Any) -> int:
    in_range(value, "a token count")
    return value if type(value) is int and value >= 0 else 0
