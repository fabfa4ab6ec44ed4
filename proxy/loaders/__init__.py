"""Trajectory files in every supported format -> Trajectory. Pure apart from `load_file`.

Formats, told apart by their shape (sniffing), not by the file name:

- "chat":            a bare JSON array of OpenAI chat messages (the canonical form)
- "messages":        {"messages": [...]}
- "jsonl":           one chat message per line
- "llm_completions": {"messages": [...], "response": {chat.completion}}; the conversation is the
                     messages plus the response's message

Every error is a LoadError naming the file and the message index.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from proxy.errors import LoadError
from proxy.loaders.chat import trajectory_from_messages
from proxy.trajectory import Trajectory

__all__ = ["LoadError", "load_bytes", "load_file"]


def load_file(path: Path, *, name: str | None = None) -> Trajectory:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LoadError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    return load_bytes(data, name=name or trajectory_name(path), source=str(path))


def trajectory_name(path: Path) -> str:
    """NAME for NAME.json / NAME.jsonl."""
    return path.name.removesuffix(".jsonl").removesuffix(".json")


def load_bytes(data: bytes, *, name: str, source: str) -> Trajectory:
    digest = hashlib.sha256(data).hexdigest()
    if not data.strip():
        raise LoadError(source, None, "the file is empty")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as whole_error:
        lines = _jsonl(data, source, whole_error)
        return trajectory_from_messages(lines, name=name, source=source, fmt="jsonl", digest=digest)
    return _from_document(doc, name=name, source=source, digest=digest)


def _from_document(doc: Any, *, name: str, source: str, digest: str) -> Trajectory:
    if isinstance(doc, list):
        return trajectory_from_messages(doc, name=name, source=source, fmt="chat", digest=digest)
    if isinstance(doc, dict):
        messages = doc.get("messages")
        if not isinstance(messages, list):
            if "role" in doc:  # a JSONL file holding a single message
                return trajectory_from_messages(
                    [doc], name=name, source=source, fmt="jsonl", digest=digest
                )
            raise LoadError(source, None, _UNRECOGNISED)
        response = doc.get("response")
        if response is None:
            return trajectory_from_messages(
                messages, name=name, source=source, fmt="messages", digest=digest
            )
        message = _response_message(response, source, len(messages))
        return trajectory_from_messages(
            [*messages, message], name=name, source=source, fmt="llm_completions", digest=digest
        )
    raise LoadError(source, None, _UNRECOGNISED)


_UNRECOGNISED = (
    "unrecognised trajectory format: expected a JSON array of chat messages, "
    '{"messages": [...]}, an llm_completions dump {"messages", "response"}, '
    "or JSONL with one message per line"
)


def _response_message(response: Any, source: str, index: int) -> Any:
    try:
        return response["choices"][0]["message"]
    except (TypeError, KeyError, IndexError):
        raise LoadError(source, index, "response has no choices[0].message") from None


def _jsonl(data: bytes, source: str, whole_error: orjson.JSONDecodeError) -> list[Any]:
    messages: list[Any] = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            messages.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            if not messages:  # not JSONL either: report it as the JSON file it claims to be
                raise LoadError(source, None, f"not valid JSON: {whole_error}") from None
            raise LoadError(
                source, len(messages), f"line {number} is not valid JSON: {exc}"
            ) from None
    return messages
