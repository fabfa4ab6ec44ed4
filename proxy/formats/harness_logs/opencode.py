"""opencode session exports: what `opencode export <sessionID>` prints.

One JSON document, `{"info": {session}, "messages": [{"info": {"role", "id", ...}, "parts": [...]}]}`
(the session's messages in order, each with its parts). The main list is `messages`: every chat
message remembers the index of the opencode message it came from. The mapping follows what opencode
itself sends to the model (session/message-v2.ts, toModelMessages):

- a user message: its `text` parts (synthetic ones too, not `ignored` ones) -> one user message;
- an assistant message: each `step-start` .. `step-finish` is one model call -> one assistant message:
  `text` parts -> content, `reasoning` parts -> reasoning_content, `tool` parts -> its parallel
  tool_calls (`callID`, `tool`, `state.input` as compact JSON); then one tool message per tool part:
  `state.output`, or `state.error` for a failed call;
- left out, each with a note: a user message's file, agent and subtask parts; the compaction request
  and its summary (a call without tools); an assistant message that failed (opencode never sends it
  back); the child session of each `task` tool call (a subagent: a session of its own).
"""

from __future__ import annotations

import json
from typing import Any

from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Misfit, Reader
from proxy.replay.trajectory import Note, Usage
from proxy.replay.usage import OutOfRange, token_count

INTERRUPTED = "[Tool execution was interrupted]"  # what opencode sends for a call that never ended
CLEARED = "[Old tool result content cleared]"  # ... and for an output compaction cleared
BOOKKEEPING = {"step-start", "step-finish", "snapshot", "patch", "retry"}


def miss(doc: Any) -> Misfit | None:
    expected = 'an opencode session export {"info": {...}, "messages": [{"info", "parts"}]}'
    if not isinstance(doc, dict):
        return Misfit(f"expected {expected}: the document is not an object")
    marks = int(isinstance(doc.get("info"), dict)) + int(isinstance(doc.get("messages"), list))
    if marks < 2:
        where = "$.info" if not isinstance(doc.get("info"), dict) else "$.messages"
        return Misfit(f"expected {expected}: {where} is missing", marks)
    messages = doc["messages"]
    first = messages[0] if messages else None
    if first is not None and not (
        isinstance(first, dict) and isinstance(first.get("info"), dict) and "parts" in first
    ):
        return Misfit(f'expected {expected}: $.messages[0] has no "info" and "parts"', marks)
    return None


def convert(doc: Any, filename: str) -> list[Converted]:
    messages: list[dict[str, Any]] = []
    indexes: list[int] = []
    left_out: list[Note] = []
    for index, item in enumerate(doc["messages"]):
        info, parts = _message(item, filename, index)
        role = info.get("role")
        if role == "user":
            text = _user(parts, filename, index, left_out)
            if text is not None:
                messages.append({"role": "user", "content": text})
                indexes.append(index)
        elif role == "assistant":
            why = _left_out_assistant(info, parts)
            if why is not None:
                left_out.append(Note(index, why))
                continue
            for message in _assistant(parts, filename, index, left_out):
                messages.append(message)
                indexes.append(index)
        else:
            raise LoadError(filename, index, f"info.role must be user or assistant, not {role!r}")
    return [Converted(messages, indexes, left_out)]


def _message(item: Any, filename: str, index: int) -> tuple[dict[str, Any], list[Any]]:
    if not isinstance(item, dict) or not isinstance(item.get("info"), dict):
        raise LoadError(filename, index, 'message has no "info" object')
    parts = item.get("parts")
    if not isinstance(parts, list):
        raise LoadError(filename, index, "parts must be a list")
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise LoadError(filename, index, f"parts[{j}] has no type")
    return item["info"], parts


def _user(parts: list[dict[str, Any]], filename: str, index: int, notes: list[Note]) -> str | None:
    texts: list[str] = []
    for j, part in enumerate(parts):
        kind = part["type"]
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise LoadError(filename, index, f"parts[{j}].text must be a string")
            if not part.get("ignored"):
                texts.append(part["text"])
        elif kind == "compaction":
            notes.append(Note(index, "a compaction request: opencode asks for a summary here"))
            return None
        elif kind == "file":
            name = part.get("filename") or part.get("url", "")
            notes.append(Note(index, f"parts[{j}]: attached file {name!r} (not replayed)"))
        elif kind == "subtask":
            notes.append(Note(index, f"parts[{j}]: a subtask for agent {part.get('agent')!r}"))
        elif kind not in BOOKKEEPING:
            notes.append(Note(index, f"parts[{j}]: a {kind} part of a user message"))
    if not texts:
        notes.append(Note(index, "a user message with no text"))
        return None
    # the AI SDK sends a user message's text parts as one content, and the chat API joins them
    return "\n".join(texts)


def _left_out_assistant(info: dict[str, Any], parts: list[dict[str, Any]]) -> str | None:
    if info.get("summary") is True:
        return "the compaction summary (a call without tools: never a scripted turn)"
    error = info.get("error")
    if isinstance(error, dict):
        name = error.get("name", "an error")
        produced = any(p["type"] not in ("step-start", "reasoning") for p in parts)
        if not (name == "MessageAbortedError" and produced):  # as opencode: aborted output stays
            return f"an assistant message that failed ({name}): opencode never sends it back"
    return None


def _assistant(
    parts: list[dict[str, Any]], filename: str, index: int, notes: list[Note]
) -> list[dict[str, Any]]:
    """One assistant message per step, each followed by its tool results."""
    out: list[dict[str, Any]] = []
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []

    def flush(finish: dict[str, Any] | None = None) -> None:
        if not (text or reasoning or calls):
            return
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if finish is not None:  # step-finish: what the step cost, its input less the cache's
            try:
                message["usage"] = step_tokens(finish.get("tokens"))
            except OutOfRange as exc:
                raise LoadError(filename, index, str(exc)) from None
        if reasoning:
            message["reasoning_content"] = "".join(reasoning)
        if calls:
            message["tool_calls"] = list(calls)
        out.append(message)
        out.extend(results)
        for pending in (text, reasoning, calls, results):
            pending.clear()

    for j, part in enumerate(parts):
        kind = part["type"]
        if kind in ("step-start", "step-finish"):
            flush(part if kind == "step-finish" else None)
        elif kind == "text":
            text.append(_string(part, "text", filename, index, j))
        elif kind == "reasoning":
            reasoning.append(_string(part, "text", filename, index, j))
        elif kind == "tool":
            call, result = _tool(part, filename, index, j, notes)
            calls.append(call)
            results.append(result)
        elif kind not in BOOKKEEPING:
            notes.append(Note(index, f"parts[{j}]: a {kind} part of an assistant message"))
    flush()
    return out


def _tool(
    part: dict[str, Any], filename: str, index: int, j: int, notes: list[Note]
) -> tuple[dict[str, Any], dict[str, Any]]:
    call_id = _string(part, "callID", filename, index, j)
    name = _string(part, "tool", filename, index, j)
    state = part.get("state")
    if not isinstance(state, dict) or not isinstance(state.get("input"), dict):
        raise LoadError(filename, index, f"parts[{j}].state.input must be an object")
    # compact, as opencode's JSON.stringify sends it back: the arguments compare equal
    arguments = json.dumps(state["input"], ensure_ascii=False, separators=(",", ":"))
    status = state.get("status")
    metadata: dict[str, Any] = state.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise LoadError(filename, index, f"parts[{j}].state.metadata must be an object")
    if status == "completed":
        compacted = isinstance(state.get("time"), dict) and state["time"].get("compacted")
        output = CLEARED if compacted else str(state.get("output", ""))
    elif status == "error":  # an interrupted call keeps what it printed, as opencode sends it
        kept = metadata.get("output") if metadata.get("interrupted") is True else None
        output = kept if isinstance(kept, str) else str(state.get("error", ""))
    else:
        output = INTERRUPTED
    child = metadata.get("sessionId")
    if name == "task" and isinstance(child, str):
        notes.append(
            Note(index, f"subagent session {child} of task call {call_id}: a session of its own")
        )
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return call, {"role": "tool", "tool_call_id": call_id, "content": output}


def _string(part: dict[str, Any], key: str, filename: str, index: int, j: int) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise LoadError(filename, index, f"parts[{j}].{key} must be a string")
    return value


READER = Reader(name="opencode", lines=False, miss=miss, convert=convert)


def step_tokens(value: Any) -> Usage | None:
    """A step-finish's tokens: its input, output, reasoning and cache counts all apart."""
    if not isinstance(value, dict) or not isinstance(value.get("cache"), dict):
        return None
    cache = value["cache"]
    read, written = token_count(cache.get("read")), token_count(cache.get("write"))
    reasoning = token_count(value.get("reasoning"))
    return Usage(
        token_count(value.get("input")) + read + written,
        token_count(value.get("output")) + reasoning,
        read,
        written,
        reasoning,
    )
