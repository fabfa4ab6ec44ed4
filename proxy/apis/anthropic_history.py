"""Anthropic Messages API messages -> chat messages, so one set of skip rules serves every API.

An assistant message's text, thinking and tool_use blocks become content, reasoning_content and
tool calls (the tool_use id is the call id); each tool_result block in a user message becomes a
tool message; the rest of a user message's text stays a user message. `role: "system"` messages
inside the list (Claude Code's mid-conversation system beta) are system messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from proxy.errors import LoadError
from proxy.replay.content import text_of
from proxy.replay.trajectory import DISPATCH, Usage, dispatch_of
from proxy.replay.usage import token_count

MARKERS = frozenset({"tool_use", "tool_result", "thinking", "redacted_thinking"})

# a tool_use block's fields its harness dispatches it by: what called it (a server tool's code,
# for programmatic calls), and the toolset it is in
DISPATCH_FIELDS = ("caller", "toolset_name")


def read_usage(value: dict[str, Any]) -> Usage | None:
    """A Messages API usage, known by its cache fields (every answer carries them); its
    `input_tokens` leave out what the cache read and wrote, which the input counts here. None when
    `value` is not one."""
    if "cache_read_input_tokens" not in value and "cache_creation_input_tokens" not in value:
        return None
    read = token_count(value.get("cache_read_input_tokens"))
    written = token_count(value.get("cache_creation_input_tokens"))
    return Usage(
        token_count(value.get("input_tokens")) + read + written,
        token_count(value.get("output_tokens")),
        read,
        written,
    )


def looks_like_anthropic(messages: Sequence[Any]) -> bool:
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in MARKERS for b in content
        ):
            return True
    return False


def holds(doc: dict[str, Any]) -> bool:
    """A trajectory file's object in the Messages API's request shape ({"messages", "system"})."""
    messages = doc.get("messages")
    return isinstance(messages, list) and (looks_like_anthropic(messages) or "system" in doc)


def marks(item: dict[str, Any]) -> bool:
    """An item of a bare list that only an Anthropic message list holds (a tool_use block...)."""
    content = item.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") in MARKERS for b in content
    )


def read(
    messages: Sequence[Any], filename: str, doc: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[int]]:
    """A trajectory file's messages (and the object's system prompt) as chat messages."""
    return messages_to_chat(messages, filename, system=doc.get("system"))


def system_text(system: Any) -> str | None:
    if system is None:
        return None
    return text_of(system)


def messages_to_chat(
    messages: Sequence[Any], filename: str, *, system: Any = None
) -> tuple[list[dict[str, Any]], list[int]]:
    """Chat messages and, for each, the index of the Anthropic message it came from (-1: system)."""
    out: list[dict[str, Any]] = []
    indexes: list[int] = []
    text = system_text(system)
    if text:
        out.append({"role": "system", "content": text})
        indexes.append(-1)
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise LoadError(filename, index, "message is not a JSON object")
        role, content = message.get("role"), message.get("content")
        if not isinstance(content, list):
            out.append({"role": role, "content": content})
            indexes.append(index)
            continue
        if role == "assistant":
            out.append(_assistant(content, filename, index))
            indexes.append(index)
            continue
        texts = []
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": block.get("tool_use_id"),
                        "content": text_of(block.get("content")),
                    }
                )
                indexes.append(index)
            elif block.get("type") == "text":
                texts.append(block)
        if texts or not content:
            out.append({"role": role, "content": texts})
            indexes.append(index)
    return out, indexes


def _assistant(blocks: list[Any], filename: str, index: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "thinking":
            thoughts.append(block.get("thinking") or "")
        elif kind == "tool_use":
            name, call_id = block.get("name"), block.get("id")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise LoadError(filename, index, "tool_use block needs an id and a name")
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            if (dispatch := dispatch_of("anthropic", DISPATCH_FIELDS, block)) is not None:
                call[DISPATCH] = dispatch  # served with it over this API
            calls.append(call)
    message["content"] = "\n".join(texts) or None
    if any(thoughts):
        message["reasoning_content"] = "\n\n".join(t for t in thoughts if t)
    if calls:
        message["tool_calls"] = calls
    return message
