"""SWE-agent trajectories: the `<instance id>.traj` file SWE-agent writes for each instance.

One JSON document (sweagent/agent/agents.py, get_trajectory_data):
`{"history": [...], "trajectory": [steps], "info": {exit_status, submission, model_stats, ...},
"replay_config": ..., "environment": ...}`; a RetryAgent run adds `"attempts": [{...}, ...]` and
puts the chosen attempt's keys beside it. The conversation is `history`, the messages the model was
sent (`trajectory` repeats each step for viewers). Indexes are positions in `history`. The mapping
is what SWE-agent itself sends (sweagent/agent/models.py, _history_to_messages):

- system / user messages -> the same; `assistant` -> its `content` (the raw model output), its
  `tool_calls` as recorded (function-calling mode: ids kept), `thinking_blocks` -> reasoning_content;
- a `tool` message -> a tool message for `tool_call_ids[0]` (SWE-agent sends one call per step);
- in text-action mode (no tool calls: the action is a ``` block in the text) the result is a
  text-based script (proxy.replay.text_based): each step is a turn, the observations between them
  user messages;
- left out, with a note: demonstrations (`is_demo`: SWE-agent puts them in the prompt itself),
  messages of another agent than the first one's, and the attempts that were not chosen.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Misfit, Reader
from proxy.replay.trajectory import Note

EXPECTED = 'a SWE-agent trajectory {"history": [...], "trajectory": [...], "info": {...}}'
MARKS = ("agent", "message_type")  # what every SWE-agent history item has, and chat messages lack


def miss(doc: Any) -> Misfit | None:
    if not isinstance(doc, dict):
        return Misfit(f"expected {EXPECTED}: the document is not an object")
    marks = sum(  # not "info": mini-swe-agent's and opencode's files have one too
        (
            isinstance(doc.get("history"), list),
            isinstance(doc.get("trajectory"), list),
            isinstance(doc.get("attempts"), list),
            "replay_config" in doc or "environment" in doc,
        )
    )
    history = _history(doc)
    if history is None:
        return Misfit(f"expected {EXPECTED}: $.history is missing", marks)
    first = history[0] if history else None
    if not (isinstance(first, dict) and any(key in first for key in MARKS)):
        return Misfit(
            f'expected {EXPECTED}: $.history[0] has no "agent" or "message_type"', max(marks, 1)
        )
    return None


def _history(doc: dict[str, Any]) -> list[Any] | None:
    """The chosen attempt's history; without one (a retry run still going), the last attempt's."""
    if isinstance(doc.get("history"), list):
        history: list[Any] = doc["history"]
        return history
    attempts = doc.get("attempts")
    if isinstance(attempts, list) and attempts and isinstance(attempts[-1], dict):
        last = attempts[-1].get("history")
        return last if isinstance(last, list) else None
    return None


def convert(doc: Any, filename: str) -> list[Converted]:
    history = _history(doc)
    if history is None:
        raise LoadError(filename, None, "a SWE-agent trajectory without a history")
    messages: list[dict[str, Any]] = []
    indexes: list[int] = []
    left_out = _attempts(doc)
    agent: str | None = None
    for index, item in enumerate(history):
        if not isinstance(item, dict) or not isinstance(item.get("role"), str):
            raise LoadError(filename, index, "history item has no role")
        if agent is None and isinstance(item.get("agent"), str):
            agent = item["agent"]
        if item.get("is_demo"):
            left_out.append(Note(index, "a demonstration (is_demo): SWE-agent adds it itself"))
            continue
        if item.get("agent", agent) != agent:
            left_out.append(Note(index, f"a message of agent {item['agent']!r}, not {agent!r}"))
            continue
        messages.append(_message(item, filename, index))
        indexes.append(index)
    return [Converted(messages, indexes, left_out)]


def _message(item: dict[str, Any], filename: str, index: int) -> dict[str, Any]:
    role, content = item["role"], item.get("content")
    if role == "tool":
        ids = item.get("tool_call_ids")
        call_id = ids[0] if isinstance(ids, list) and ids else item.get("tool_call_id")
        if not isinstance(call_id, str):
            raise LoadError(filename, index, "tool message has no tool_call_ids")
        return {"role": "tool", "tool_call_id": call_id, "content": content}
    message: dict[str, Any] = {"role": role, "content": content}
    if role != "assistant":
        return message
    calls = item.get("tool_calls")
    if calls:  # None or [] in text-action mode
        if not isinstance(calls, list):
            raise LoadError(filename, index, "tool_calls must be a list")
        message["tool_calls"] = [_call(call, filename, index, j) for j, call in enumerate(calls)]
    thinking = [
        block.get("thinking")
        for block in item.get("thinking_blocks") or []
        if isinstance(block, dict) and block.get("type") == "thinking"
    ]
    if any(isinstance(t, str) and t for t in thinking):
        message["reasoning_content"] = "\n\n".join(t for t in thinking if isinstance(t, str) and t)
    return message


def _call(call: Any, filename: str, index: int, j: int) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        raise LoadError(filename, index, f"tool_calls[{j}] has no function object")
    return {"id": call.get("id"), "type": "function", "function": fn}


def _attempts(doc: dict[str, Any]) -> list[Note]:
    attempts = doc.get("attempts")
    if not isinstance(attempts, list) or len(attempts) < 2:
        return []
    info = _object(doc.get("info"))
    chosen = info.get("best_attempt_idx") if "history" in doc else len(attempts) - 1
    return [
        Note(0, f"attempts[{k}]: another attempt of the retry agent (attempt {chosen} is read)")
        for k in range(len(attempts))
        if k != chosen
    ]


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


READER = Reader(name="swe-agent", lines=False, miss=miss, convert=convert)
