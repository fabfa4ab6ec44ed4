"""An assistant message as the script keeps it (formats/chat.py reads the messages around it):
its text and reasoning, its tool calls (an id made up for each that came without one, its
arguments checked as JSON), when it was made and what it cost.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

import orjson

from proxy.apis import usage_in
from proxy.errors import LoadError
from proxy.replay.content import split_reasoning, text_of
from proxy.replay.trajectory import DISPATCH, ToolCall, Usage
from proxy.replay.usage import in_range


def assistant_text(msg: dict[str, Any], content: Any) -> tuple[str | None, str]:
    thought, text = split_reasoning(content if type(content) is str else text_of(content))
    explicit = msg.get("reasoning_content")
    if not isinstance(explicit, str) or not explicit:
        explicit = msg.get("reasoning") if isinstance(msg.get("reasoning"), str) else None
    parts = [p for p in (explicit, thought) if p]
    return ("\n\n".join(parts) if parts else None), text


def tool_calls(
    msg: dict[str, Any], filename: str, idx: int, digest: str, number: int
) -> tuple[tuple[ToolCall, ...], list[str]]:
    """The turn's calls, and the ids made up for those that had none."""
    raw = msg.get("tool_calls")
    if raw is None and isinstance(msg.get("function_call"), dict):
        raw = [{"function": msg["function_call"]}]  # the legacy single-function form
    if raw is None:
        return (), []
    if not isinstance(raw, list):
        raise LoadError(filename, idx, "tool_calls must be a list")
    calls: list[ToolCall] = []
    made_up: list[str] = []
    seen: set[str] = set()
    for j, call in enumerate(raw):
        fn = call.get("function") if type(call) is dict else None
        if type(fn) is not dict:
            raise LoadError(filename, idx, f"tool_calls[{j}] has no function object")
        name = fn.get("name")
        if type(name) is not str or not name:
            raise LoadError(filename, idx, f"tool_calls[{j}].function.name is missing")
        call_id = call.get("id")
        if type(call_id) is not str or not call_id:
            call_id = synthetic_call_id(digest, number, j)
            made_up.append(call_id)
        if call_id in seen:
            raise LoadError(
                filename, idx, f"tool_calls[{j}].id {call_id!r} is used twice in one turn"
            )
        seen.add(call_id)
        dispatch = call.get(DISPATCH)
        calls.append(
            ToolCall(
                call_id,
                name,
                normalize_arguments(fn.get("arguments"), filename, idx, j),
                _dispatch(dispatch, filename, idx, j) if dispatch is not None else None,
            )
        )
    return tuple(calls), made_up


def _dispatch(value: Any, filename: str, idx: int, position: int) -> dict[str, dict[str, Any]]:
    """A call's recorded dispatch fields: {api: {field: value}} (proxy.replay.trajectory)."""
    if type(value) is not dict or not all(type(v) is dict for v in value.values()):
        where = f"tool_calls[{position}].{DISPATCH}"
        raise LoadError(
            filename, idx, f'{where} must be an object: {{"<api>": {{"<field>": ...}}}}'
        )
    return value


def normalize_arguments(value: Any, filename: str, idx: int, position: int) -> str:
    """Arguments stay verbatim when they are a JSON string; a dict is encoded; empty is "{}"."""
    if type(value) is str:
        if not value or value.isspace():
            return "{}"
        try:
            orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            where = f"tool_calls[{position}].function.arguments"
            raise LoadError(filename, idx, f"{where} is not valid JSON: {exc}") from None
        return value
    if value is None:
        return "{}"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    where = f"tool_calls[{position}].function.arguments"
    raise LoadError(filename, idx, f"{where} must be a JSON string or object")


def epoch(value: Any) -> int | None:
    """When an answer was made, as epoch seconds: a number, or an ISO 8601 time as logs write."""
    in_range(value, "the time it was made (created)")
    if type(value) is int:
        return value if value > 0 else None
    if type(value) is float:
        return int(value) if value > 0 else None
    if type(value) is str:
        try:
            return int(datetime.fromisoformat(value).timestamp())
        except ValueError:
            return None
    return None


def synthetic_call_id(digest: str, turn: int, position: int) -> str:
    """Deterministic, so a restarted proxy or another worker serves the same id."""
    return "call_" + hashlib.sha256(f"{digest}:{turn}:{position}".encode()).hexdigest()[:24]


def usage_of(value: Any) -> Usage | None:
    """A message's recorded usage: read already by a harness log's reader (a shape of its own), or
    as an API wrote it."""
    return value if isinstance(value, Usage) else usage_in(value)
