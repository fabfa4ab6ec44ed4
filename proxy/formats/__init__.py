"""Trajectory files in every supported format -> Trajectory. Pure apart from `load_file`.

Formats, told apart by their shape (sniffing), not by the file name:

- "chat":            a bare JSON array of OpenAI chat messages (the canonical form)
- "messages":        {"messages": [...]}
- "jsonl":           one chat message per line
- "llm_completions": {"messages": [...], "response": {chat.completion}}; the conversation is the
                     messages plus the response's message
- "responses":       OpenAI Responses API input items, a bare list or {"input": [...], "instructions"}
- "anthropic":       Anthropic Messages API messages (tool_use / tool_result blocks), a bare list or
                     {"messages": [...], "system": ...}
- "recording":       what --record-dir writes: one exchange per line (see loaders/recording.py);
                     a half-written last line (a crash mid-write) is skipped with a warning

Every error is a LoadError naming the file and the message index.
"""

from __future__ import annotations

import gc
import hashlib
import logging
from pathlib import Path
from typing import Any

import orjson

from proxy.errors import LoadError
from proxy.formats.anthropic import MARKERS as ANTHROPIC_ONLY
from proxy.formats.anthropic import looks_like_anthropic, messages_to_chat
from proxy.formats.chat import trajectory_from_messages
from proxy.formats.recording import is_recording, trajectory_from_recording
from proxy.formats.responses import RESPONSES_ONLY, items_to_chat
from proxy.replay.trajectory import Note, Trajectory

log = logging.getLogger("proxy.formats")

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
    # A large file allocates a few hundred thousand objects that all stay alive: the cyclic
    # collector would walk them again and again for nothing (a third of the load time at 10 MB).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load(data, name=name, source=source)
    finally:
        if collecting:
            gc.enable()


def _load(data: bytes, *, name: str, source: str) -> Trajectory:
    digest = hashlib.sha256(data).hexdigest()
    if not data.strip():
        raise LoadError(source, None, "the file is empty")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as whole_error:
        return _from_lines(data, name=name, source=source, digest=digest, whole_error=whole_error)
    if is_recording(doc):  # a recording of a single exchange
        return trajectory_from_recording([(0, doc)], name=name, source=source, digest=digest)
    return _from_document(doc, name=name, source=source, digest=digest)


def _from_document(doc: Any, *, name: str, source: str, digest: str) -> Trajectory:
    if isinstance(doc, list):
        return _from_list(doc, name=name, source=source, digest=digest, fmt="chat")
    if isinstance(doc, dict):
        if isinstance(doc.get("input"), list):
            chat, indexes = items_to_chat(
                doc["input"], source, instructions=doc.get("instructions")
            )
            return trajectory_from_messages(
                chat, name=name, source=source, fmt="responses", digest=digest, indexes=indexes
            )
        messages = doc.get("messages")
        if isinstance(messages, list) and (looks_like_anthropic(messages) or "system" in doc):
            chat, indexes = messages_to_chat(messages, source, system=doc.get("system"))
            return trajectory_from_messages(
                chat, name=name, source=source, fmt="anthropic", digest=digest, indexes=indexes
            )
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
    "unrecognised trajectory format: expected a JSON array of chat messages, Responses items or "
    'Anthropic messages; {"messages": [...]}; {"input": [...]}; an llm_completions dump '
    '{"messages", "response"}; JSONL with one message per line; or a recording'
)


def _response_message(response: Any, source: str, index: int) -> Any:
    try:
        return response["choices"][0]["message"]
    except (TypeError, KeyError, IndexError):
        raise LoadError(source, index, "response has no choices[0].message") from None


def _from_lines(
    data: bytes, *, name: str, source: str, digest: str, whole_error: orjson.JSONDecodeError
) -> Trajectory:
    raw = data.splitlines()
    items: list[tuple[int, Any]] = []  # (line index, value)
    notes: list[Note] = []
    for number, line in enumerate(raw):
        if not line.strip():
            continue
        try:
            items.append((number, orjson.loads(line)))
        except orjson.JSONDecodeError as exc:
            if not items:  # not JSONL either: report it as the JSON file it claims to be
                raise LoadError(source, None, f"not valid JSON: {whole_error}") from None
            last = not any(rest.strip() for rest in raw[number + 1 :])
            if last and is_recording(items[0][1]):
                reason = (
                    f"line {number + 1} is half-written (the recorder stopped mid-line); ignored"
                )
                log.warning("%s: %s", source, reason)
                notes.append(Note(number, reason))
                continue
            raise LoadError(
                source, len(items), f"line {number + 1} is not valid JSON: {exc}"
            ) from None
    if is_recording(items[0][1]):
        return trajectory_from_recording(
            items, name=name, source=source, digest=digest, notes=notes
        )
    return _from_list(
        [value for _, value in items], name=name, source=source, digest=digest, fmt="jsonl"
    )


def dialect(items: list[Any]) -> str:
    """chat, responses or anthropic: decided by the first item only one of them could hold (a
    tool call or result is there early in any real run), so a large file is not scanned twice."""
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") in RESPONSES_ONLY:
            return "responses"
        if "tool_calls" in item or item.get("role") == "tool":
            return "chat"
        content = item.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ANTHROPIC_ONLY for b in content
        ):
            return "anthropic"
    return "chat"


def _from_list(items: list[Any], *, name: str, source: str, digest: str, fmt: str) -> Trajectory:
    """A list of chat messages, Responses items or Anthropic messages."""
    kind = dialect(items)
    if kind == "responses":
        chat, indexes = items_to_chat(items, source)
        return trajectory_from_messages(
            chat, name=name, source=source, fmt="responses", digest=digest, indexes=indexes
        )
    if kind == "anthropic":
        chat, indexes = messages_to_chat(items, source)
        return trajectory_from_messages(
            chat, name=name, source=source, fmt="anthropic", digest=digest, indexes=indexes
        )
    return trajectory_from_messages(items, name=name, source=source, fmt=fmt, digest=digest)
