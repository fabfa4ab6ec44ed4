"""OpenAI chat messages -> Trajectory, by the script rules of docs/formats.md.

- system/developer and tool messages are not turns (tool outputs are kept as reference data);
- the first user message is the task; later user messages attach to the turn they precede,
  or trail after the last turn;
- each assistant message with text or tool calls is one turn with all its calls;
- a text-only one ends an exchange; user messages after it are the follow-up that opens the next
  exchange (the harness sends those itself), and an assistant or tool message that comes after it
  with no user message between is dropped;
- an assistant message without tool calls before the first user message (and before any turn)
  is part of the prompt, like the system prompt: the environment put it there (a greeting);
  assistant steps before a user message that come after a turn, or with tool calls, are turns, and
  the task is the first user message only if no turn came before it;
- an assistant message right after a text-only turn is dropped, unless the file records it as a
  model call of its own (it carries `generation_token_ids`, as NeMo-Gym's training rollouts do for
  each call): then it is the next turn, whose prompt (an observation, a user line) was not recorded;
- an empty assistant message that is the last answer is replayed as it was recorded; one with
  more answers after it is skipped (requests are read without empty messages: served mid-script,
  it would be due again), and so is one before the task;
- a tool message without a tool_call_id answers the earliest call of the turn before it that had
  no recorded id (so a file that records no ids at all still pairs calls and outputs);
- skipped and dropped messages are reported;
- with no tool call at all the script is text-based (proxy.replay.text_based): the user messages
  between turns are the harness's observations, and it is one exchange.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from proxy.apis import usage_in
from proxy.apis.responses_history import OWN_CALL
from proxy.errors import LoadError
from proxy.replay.content import split_reasoning, text_of
from proxy.replay.tokens import BadTokens, Tokens, read_tokens
from proxy.replay.trajectory import (
    DISPATCH,
    Note,
    ToolCall,
    Trajectory,
    Turn,
    Usage,
    UserMessage,
    place_of,
)
from proxy.replay.usage import OutOfRange, in_range


def trajectory_from_messages(
    messages: Sequence[Any],
    *,
    name: str,
    source: str,
    fmt: str,
    digest: str,
    indexes: Sequence[int] | None = None,
    places: Mapping[int, str] | None = None,
    unit: str = "message",
) -> Trajectory:
    """Build the script. `indexes` maps each message to its position in the file, when the
    messages were converted from another shape (errors and notes must point into the file);
    `places` and `unit` say how to name a position (Trajectory.place)."""
    task: str | None = None
    systems: list[str] = []  # joined once as the API parsers join them (conv.system)
    greetings: list[str] = []  # assistant text before the task: prompt (replay.conversation)
    # until the task or a turn, no user message has come: "before the task" needs one to follow
    has_user = any(type(m) is dict and m.get("role") == "user" for m in messages)
    empty: tuple[int, str | None, Tokens | None] | None = (
        None  # an empty answer, until what follows settles it
    )
    provisional = False  # the last turn is an empty answer, which stands only if no answer follows
    unanswered: deque[str] = deque()  # ids made up for the last turn's calls, not answered yet
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
        if empty is not None and role in ("assistant", "user"):
            if role == "assistant" or provisional:
                skipped.append(_placeholder(empty))
            else:  # a user message: the empty answer ended its exchange, unless more answers come
                final_index = _empty_answer(turns, empty, pending, follow_up, exchange)
                pending, follow_up, provisional = [], [], True
                unanswered.clear()
            empty = None
        if final_index is not None and role in ("assistant", "tool"):
            if not follow_up and role == "assistant" and OWN_CALL in msg:
                follow_up = []  # a model call of its own: what it was sent was not recorded
            elif not follow_up:
                dropped.append(
                    Note(
                        idx,
                        f"{role} message right after the text-only turn "
                        f"({place_of(final_index, places, unit)}) "
                        "with no user message between",
                    )
                )
                continue
            final_index = None
            exchange += 1
        if role in ("system", "developer"):
            if task is None and not turns:  # the prompt ends at the task or the first turn
                systems.append(text_of(content))
        elif role == "tool":
            call_id = msg.get("tool_call_id")
            if type(call_id) is not str and unanswered:
                call_id = unanswered.popleft()
            if type(call_id) is str:
                outputs[call_id] = content if type(content) is str else text_of(content)
            else:
                skipped.append(Note(idx, "tool message without a tool_call_id"))
        elif role == "user":
            if task is None and not turns:
                task = text_of(content)
            elif final_index is not None:
                follow_up.append(UserMessage(idx, content if content is not None else ""))
            else:
                pending.append(UserMessage(idx, content if content is not None else ""))
        elif role == "assistant":
            reasoning, text = _assistant_text(msg, content)
            try:
                tokens = read_tokens(msg)
            except BadTokens as exc:
                if fmt != "recording":
                    raise LoadError(source, idx, str(exc)) from None
                # an upstream's answer, recorded as it came: its run is still a run
                skipped.append(Note(idx, f"its token fields are not kept: {exc}"))
                tokens = None
            calling = bool(msg.get("tool_calls")) or isinstance(msg.get("function_call"), dict)
            if not calling and not text.strip():
                if task is None and not turns and has_user:
                    skipped.append(Note(idx, "empty assistant message before the task"))
                else:
                    empty = (idx, reasoning, tokens)
                continue
            if provisional:  # an answer follows the empty one: a harness never sends it back
                pending, follow_up, exchange = _withdrawn(turns, pending, follow_up, skipped)
                provisional = False
            number = len(turns) + 1
            calls, made_up = _tool_calls(msg, source, idx, digest, number)
            if not calls and task is None and not turns and has_user:
                greetings.append(text)  # before the task: prompt, compared like the system prompt
                continue
            unanswered = deque(made_up)
            try:
                created = epoch(msg.get("created"))
                usage = _usage(msg.get("usage"))
            except OutOfRange as exc:
                raise LoadError(source, idx, str(exc)) from None
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
                    usage,
                    created,
                    tokens,
                )
            )
            pending, follow_up = [], []
            if not calls:
                final_index = idx
        else:
            skipped.append(Note(idx, f"unknown role {role!r}"))
    if empty is not None and not provisional:  # the last answer was empty: as it was recorded
        _empty_answer(turns, empty, pending, follow_up, exchange)
        pending, follow_up = [], []
    elif empty is not None:
        skipped.append(_placeholder(empty))
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
        system="\n".join([*systems, *greetings]) if systems or greetings else None,
        turns=tuple(turns),
        trailing_users=tuple(pending),
        tool_outputs=outputs,
        skipped=tuple(skipped),
        dropped=tuple(dropped),
        places=places or {},
        unit=unit,
        read=len(messages),
    )


def _placeholder(empty: tuple[int, str | None, Tokens | None]) -> Note:
    only = " (reasoning only)" if empty[1] else ""
    return Note(empty[0], f"empty assistant message{only}, followed by another answer")


def _withdrawn(
    turns: list[Turn], pending: list[UserMessage], follow_up: list[UserMessage], skipped: list[Note]
) -> tuple[list[UserMessage], list[UserMessage], int]:
    """Take back an empty answer that more answers follow. The request parsers pass over empty
    assistant messages, so served mid-script it would be due again on every request; it is skipped,
    and the user messages after it come before the next turn, as if it had never been read."""
    empty = turns.pop()
    skipped.append(
        Note(
            empty.index,
            "empty assistant message, followed by more of the run: only a last answer is "
            "replayed empty",
        )
    )
    return [*empty.users_before, *follow_up, *pending], list(empty.follow_up), empty.exchange


def _empty_answer(
    turns: list[Turn],
    empty: tuple[int, str | None, Tokens | None],
    pending: list[UserMessage],
    follow_up: list[UserMessage],
    exchange: int,
) -> int:
    """An empty answer that nothing replaced: a final turn with no text, as the model gave it."""
    idx, reasoning, tokens = empty
    turns.append(
        Turn(
            len(turns) + 1,
            idx,
            "",
            reasoning,
            (),
            tuple(pending),
            None,
            exchange,
            tuple(follow_up),
            tokens=tokens,
        )
    )
    return idx


def _assistant_text(msg: dict[str, Any], content: Any) -> tuple[str | None, str]:
    thought, text = split_reasoning(content if type(content) is str else text_of(content))
    explicit = msg.get("reasoning_content")
    if not isinstance(explicit, str) or not explicit:
        explicit = msg.get("reasoning") if isinstance(msg.get("reasoning"), str) else None
    parts = [p for p in (explicit, thought) if p]
    return ("\n\n".join(parts) if parts else None), text


def _tool_calls(
    msg: dict[str, Any], source: str, idx: int, digest: str, number: int
) -> tuple[tuple[ToolCall, ...], list[str]]:
    """The turn's calls, and the ids made up for those that had none."""
    raw = msg.get("tool_calls")
    if raw is None and isinstance(msg.get("function_call"), dict):
        raw = [{"function": msg["function_call"]}]  # the legacy single-function form
    if raw is None:
        return (), []
    if not isinstance(raw, list):
        raise LoadError(source, idx, "tool_calls must be a list")
    calls: list[ToolCall] = []
    made_up: list[str] = []
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
            made_up.append(call_id)
        if call_id in seen:
            raise LoadError(
                source, idx, f"tool_calls[{j}].id {call_id!r} is used twice in one turn"
            )
        seen.add(call_id)
        dispatch = call.get(DISPATCH)
        calls.append(
            ToolCall(
                call_id,
                name,
                normalize_arguments(fn.get("arguments"), source, idx, j),
                _dispatch(dispatch, source, idx, j) if dispatch is not None else None,
            )
        )
    return tuple(calls), made_up


def _dispatch(value: Any, source: str, idx: int, position: int) -> dict[str, dict[str, Any]]:
    """A call's recorded dispatch fields: {api: {field: value}} (proxy.replay.trajectory)."""
    if type(value) is not dict or not all(type(v) is dict for v in value.values()):
        where = f"tool_calls[{position}].{DISPATCH}"
        raise LoadError(source, idx, f'{where} must be an object: {{"<api>": {{"<field>": ...}}}}')
    return value


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


def _usage(value: Any) -> Usage | None:
    """A message's recorded usage: read already by a harness log's reader (a shape of its own), or
    as an API wrote it."""
    return value if isinstance(value, Usage) else usage_in(value)
