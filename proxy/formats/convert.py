"""Trajectory -> the canonical chat JSON: what `replay-proxy convert` writes.

The messages are the script itself, written back as OpenAI chat messages: the system prompt, the
task, each turn (its text, reasoning as `reasoning_content`, its tool calls with the recorded ids
and arguments), each call's recorded output as a tool message, and the user messages where they
stood (follow-ups before the exchange they open, the rest before the turn they preceded). A turn
that follows a text answer with no user message between (a separate model call whose prompt was
not recorded), and an empty answer, carry `generation_token_ids: []`, which keeps them turns. A turn's
recorded token ids and logprobs go on its message in the recording's own fields
(proxy.replay.tokens). Loading the written file gives the same script back; what the source held
beyond it is in the notes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from proxy.apis.responses_history import OWN_CALL
from proxy.replay.trajectory import DISPATCH, Trajectory


def to_messages(t: Trajectory) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if t.system is not None:
        messages.append({"role": "system", "content": t.system})
    if t.task is not None:
        messages.append({"role": "user", "content": t.task})
    after_final = False
    for turn in t.turns:
        for user in (*turn.follow_up, *turn.users_before):
            messages.append({"role": "user", "content": user.content})
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
        alone = after_final and not turn.follow_up and not turn.users_before
        if alone or (turn.final and not turn.text.strip()):
            message[OWN_CALL] = []  # a model call of its own: kept a turn (formats/chat.py)
        if turn.tokens is not None:  # as recorded, in the recording's own fields
            message.update(turn.tokens.message_fields())
        after_final = turn.final
        if turn.reasoning is not None:
            message["reasoning_content"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                    **({DISPATCH: c.dispatch} if c.dispatch else {}),  # kept for its own API
                }
                for c in turn.tool_calls
            ]
        messages.append(message)
        for call in turn.tool_calls:
            output = t.tool_outputs.get(call.id)
            if output is not None:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    for user in t.trailing_users:
        messages.append({"role": "user", "content": user.content})
    return messages


def write(t: Trajectory, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(to_messages(t), option=orjson.OPT_INDENT_2) + b"\n")


def report(t: Trajectory, written: Path) -> list[str]:
    """What `convert` prints for one trajectory: what it mapped, and what it left out."""
    rounds = f"{t.rounds} round" + ("" if t.rounds == 1 else "s")
    lines = [
        f"{t.filename} ({t.format}) -> {written}: {len(t.turns)} turns in {rounds}, "
        f"{t.tool_call_count} tool calls, {len(t.tool_outputs)} tool outputs"
        + (
            ", text-based (the user messages between turns are observations)"
            if t.text_based
            else ""
        )
    ]
    lines += [f"  left out {n.index}: {n.reason}" for n in (*t.skipped, *t.dropped)]
    return lines
