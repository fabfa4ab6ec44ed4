"""Trajectory -> one NeMo-Gym rollout line: what `convert --to nemo-gym` and the admin API's
`GET /replay/sessions/{id}/rollout` write, for a trainer to take as one trajectory.

The line is what `ng_collect_rollouts` writes (formats/harness_logs/nemo_gym.py reads it back):
`responses_create_params.input` holds the prompt (the system prompt and the task), and
`response.output` everything after it as Responses items, in order: per turn the user messages it
answered, its reasoning, message and function calls, then each call's recorded output. A turn's
token ids and log-probabilities (proxy.replay.tokens: `prompt_token_ids`, `generation_token_ids`,
`generation_log_probs`, `routed_experts`) go on the first item of its model call: a reader tells
the calls apart by the item that carries them (NeMo-Gym's converter takes a call's from whichever
item has them), and after a call's last item the next call's first would join it. OpenAI
logprobs stay on the output_text part. A turn that recorded none carries none, except where two
calls follow each other with nothing between: each then carries at least the mark
`generation_token_ids: []` (else they would read back as one; the chat export writes the same
mark). `response.usage` is the sum of the turns' recorded usage, as
NeMo-Gym's agents add up their calls' (null when no turn recorded any), and `created_at` the last
turn's time (left out when the run recorded none). No reward: the environment's verifier gives one.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.apis.responses_history import OWN_CALL
from proxy.replay.trajectory import Trajectory, Turn, Usage


def to_rollout(t: Trajectory, *, model: str | None = None) -> dict[str, Any]:
    given: list[dict[str, Any]] = []
    if t.system is not None:
        given.append({"role": "system", "content": t.system, "type": "message"})
    if t.task is not None:
        given.append({"role": "user", "content": t.task, "type": "message"})
    output: list[dict[str, Any]] = []
    before: dict[str, Any] | None = None  # the last call's first item, while nothing followed it
    for turn in t.turns:
        for user in (*turn.follow_up, *turn.users_before):
            output.append(_user(user.content))
            before = None
        items = _items(turn)
        if before is not None:  # two calls with nothing between: each must say it is one
            before.setdefault(OWN_CALL, [])
            items[0].setdefault(OWN_CALL, [])
        output += items
        before = items[0]
        for call in turn.tool_calls:
            recorded = t.tool_outputs.get(call.id)
            if recorded is not None:
                output.append(
                    {"type": "function_call_output", "call_id": call.id, "output": recorded}
                )
                before = None
    for user in t.trailing_users:
        output.append(_user(user.content))
    response: dict[str, Any] = {"id": f"resp_{t.digest[:24]}", "object": "response"}
    created = next((u.created for u in reversed(t.turns) if u.created is not None), None)
    if created is not None:  # a run that recorded no time says none
        response["created_at"] = created
    response.update(
        {
            "model": model or _model(t) or "unknown",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": _usage([u.usage for u in t.turns if u.usage and not u.usage.estimated]),
        }
    )
    return {"responses_create_params": {"input": given}, "response": response}


def line(t: Trajectory, *, model: str | None = None) -> bytes:
    return orjson.dumps(to_rollout(t, model=model)) + b"\n"


def _items(turn: Turn) -> list[dict[str, Any]]:
    n = turn.number
    items: list[dict[str, Any]] = []
    if turn.reasoning is not None:
        summary = [{"type": "summary_text", "text": turn.reasoning}]
        items.append({"id": f"rs_{n}", "type": "reasoning", "summary": summary})
    tokens = turn.tokens
    if turn.text or not turn.tool_calls:  # an empty final answer is a message too: it is a turn
        part = {"type": "output_text", "annotations": [], "text": turn.text}
        part["logprobs"] = (tokens.entries if tokens is not None else None) or []
        items.append(
            {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    for k, call in enumerate(turn.tool_calls):
        item = {
            "id": f"fc_{n}_{k}",
            "type": "function_call",
            "status": "completed",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
        item.update(call.served_with("responses"))  # a namespace, as recorded
        items.append(item)
    if tokens is not None and tokens.generation is not None:
        items[0].update(tokens.nemo_gym())
    return items


def _user(content: Any) -> dict[str, Any]:
    if isinstance(content, list):  # chat text parts, as Responses input parts
        content = [
            {**p, "type": "input_text"} if isinstance(p, dict) and p.get("type") == "text" else p
            for p in content
        ]
    return {"role": "user", "content": content, "type": "message"}


def _usage(recorded: list[Usage]) -> dict[str, Any] | None:
    if not recorded:
        return None
    given = sum(u.input for u in recorded)
    made = sum(u.output for u in recorded)
    return {
        "input_tokens": given,
        "input_tokens_details": {"cached_tokens": sum(u.cached for u in recorded)},
        "output_tokens": made,
        "output_tokens_details": {"reasoning_tokens": sum(u.reasoning for u in recorded)},
        "total_tokens": given + made,
    }


def _model(t: Trajectory) -> str | None:
    """The model the run's requests named, when it came from a recording."""
    for turn in reversed(t.turns):
        request = turn.recorded.request if turn.recorded is not None else None
        if isinstance(request, dict) and isinstance(request.get("model"), str):
            return str(request["model"])
    return None
