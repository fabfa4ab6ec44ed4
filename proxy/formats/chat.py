"""OpenAI chat messages -> Trajectory, by the script rules of docs/formats.md.

- system/developer and tool messages are not turns (tool outputs are kept as reference data);
- the first user message is the task; later user messages attach to the turn they precede,
  or trail after the last turn;
- each assistant message with text or tool calls is one turn with all its calls;
- a text-only one ends an exchange; user messages after it are the follow-up that opens the next
  exchange (the harness sends those itself), and an assistant or tool message that comes after it
  with no user message between is dropped;
- an empty assistant message is skipped; skipped and dropped messages are reported;
- with no tool call at all the script is text-based (proxy.replay.text_based): the user messages
  between turns are the harness's observations, and it is one exchange.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import orjson

from proxy.errors import LoadError
from proxy.replay.content import split_reasoning, text_of
from proxy.replay.trajectory import Note, ToolCall, Trajectory, Turn, UserMessage


def trajectory_from_messages(
    messages: Sequence[Any],
    *,
    name: str,
    source: str,
    fmt: str,
    digest: str,
    indexes: Sequence[int] | None = None,
) -> Trajectory:
    """Build the script. `indexes` maps each message to its position in the file, when the
    messages were converted from another shape (errors and notes must point into the file)."""
    task: str | None = None
    systems: list[str] = []  # joined once as the API parsers join them (conv.system)
    turns: list[Turn] = []
    pending: list[UserMessage] = []
    outputs: dict[str, str] = {}
    skipped: list[Note] = []
    dropped: list[Note] = []
    final_index: int | None = None  # the text-only turn that ended the exchange, until a user
    follow_up: list[UserMessage] = []  # the user messages after it
    exchange = 1

    # a 10 MB trajectory has tens of thousands of messages: this loop is kept lean on purpose
    for pos, msg in enumerate(messages):
        idx = indexes[pos] if indexes is not None else pos
        if type(msg) is not dict:
            raise LoadError(source, idx, "message is not a JSON object")
        role = msg.get("role")
        if type(role) is not str:
            raise LoadError(source, idx, "message has no role")
        content = msg.get("content")
        if content is not None and type(content) is not str and type(content) is not list:
            raise LoadError(source, idx, "content must be a string, a list of parts, or null")
        if final_index is not None and role in ("assistant", "tool"):
            if not follow_up:
                dropped.append(
                    Note(
                        idx,
                        f"{role} message right after the text-only turn (message {final_index}) "
                        "with no user message between",
                    )
                )
                continue
            final_index = None
            exchange += 1
        if role in ("system", "developer"):
            if task is None:
                systems.append(text_of(content))
        elif role == "tool":
            call_id = msg.get("tool_call_id")
            if type(call_id) is str:
                outputs[call_id] = content if type(content) is str else text_of(content)
            else:
                skipped.append(Note(idx, "tool message without a tool_call_id"))
        elif role == "user":
            if task is None:
                task = text_of(content)
            elif final_index is not None:
                follow_up.append(UserMessage(idx, content if content is not None else ""))
            else:
                pending.append(UserMessage(idx, content if content is not None else ""))
        elif role == "assistant":
            number = len(turns) + 1
            calls = _tool_calls(msg, source, idx, digest, number)
            reasoning, text = _assistant_text(msg, content)
            if not calls and not text.strip():
                why = "empty assistant message" + (" (reasoning only)" if reasoning else "")
                skipped.append(Note(idx, why))
                continue
            turns.append(
                Turn(
                    number,
                    idx,
                    text,
                    reasoning,
                    calls,
                    tuple(pending),
                    None,
                    exchange,
                    tuple(follow_up),
                )
            )
            pending, follow_up = [], []
            if not calls:
                final_index = idx
        else:
            skipped.append(Note(idx, f"unknown role {role!r}"))
    text_based = bool(turns) and not any(t.tool_calls for t in turns)
    if text_based:  # the user messages between turns are observations: one exchange
        for turn in turns:
            turn.exchange = 1
    for user in follow_up:
        what = (
            "the observation of the last turn"
            if text_based
            else "a follow-up after the last answer"
        )
        skipped.append(
            Note(
                user.index,
                f"{what}, with no recorded answer: the harness sends its own, and it goes live",
            )
        )

    return Trajectory(
        name=name,
        source=source,
        format=fmt,
        digest=digest,
        task=task,
        system="\n".join(systems) if systems else None,
        turns=tuple(turns),
        trailing_users=tuple(pending),
        tool_outputs=outputs,
        skipped=tuple(skipped),
        dropped=tuple(dropped),
    )


def _assistant_text(msg: dict[str, Any], content: Any) -> tuple[str | None, str]:
    thought, text = split_reasoning(content if type(content) is str else text_of(content))
    explicit = msg.get("reasoning_content")
    if not isinstance(explicit, str) or not explicit:
        explicit = msg.get("reasoning") if isinstance(msg.get("reasoning"), str) else None
    parts = [p for p in (explicit, thought) if p]
    return ("\n\n".join(parts) if parts else None), text


def _tool_calls(
    msg: dict[str, Any], source: str, idx: int, digest: str, number: int
) -> tuple[ToolCall, ...]:
    raw = msg.get("tool_calls")
    if raw is None and isinstance(msg.get("function_call"), dict):
        raw = [{"function": msg["function_call"]}]  # the legacy single-function form
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise LoadError(source, idx, "tool_calls must be a list")
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for j, call in enumerate(raw):
        fn = call.get("function") if type(call) is dict else None
        if type(fn) is not dict:
            raise LoadError(source, idx, f"tool_calls[{j}] has no function object")
        name = fn.get("name")
        if type(name) is not str or not name:
            raise LoadError(source, idx, f"tool_calls[{j}].function.name is missing")
        call_id = call.get("id")
        if type(call_id) is not str or not call_id:
            call_id = synthetic_call_id(digest, number, j)
        if call_id in seen:
            raise LoadError(
                source, idx, f"tool_calls[{j}].id {call_id!r} is used twice in one turn"
            )
        seen.add(call_id)
        calls.append(
            ToolCall(call_id, name, normalize_arguments(fn.get("arguments"), source, idx, j))
        )
    return tuple(calls)


def normalize_arguments(value: Any, source: str, idx: int, position: int) -> str:
    """Arguments stay verbatim when they are a JSON string; a dict is encoded; empty is "{}"."""
    if type(value) is str:
        if not value or value.isspace():
            return "{}"
        try:
            orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            where = f"tool_calls[{position}].function.arguments"
            raise LoadError(source, idx, f"{where} is not valid JSON: {exc}") from None
        return value
    if value is None:
        return "{}"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    where = f"tool_calls[{position}].function.arguments"
    raise LoadError(source, idx, f"{where} must be a JSON string or object")


def synthetic_call_id(digest: str, turn: int, position: int) -> str:
    """Deterministic, so a restarted proxy or another worker serves the same id."""
    return "call_" + hashlib.sha256(f"{digest}:{turn}:{position}".encode()).hexdigest()[:24]
