"""mini-swe-agent trajectories: the `.traj.json` file mini writes (`-o`, or
`<output dir>/<instance id>/<instance id>.traj.json` for a batch run).

One JSON document: `{"info": {exit_status, submission, model_stats, config, mini_version},
"messages": [...], "trajectory_format": "mini-swe-agent-1.1"}` (version 2; "mini-swe-agent-1" for
1.x, no format field before 1.x added it). `messages` is the conversation, and indexes are positions
in it. Every message may carry `extra` (mini's own: the raw model response, parsed actions, cost,
the command's raw output); it is dropped.

- Chat models (the default `litellm` tool-calling model, and the text-based ones): each message is
  a chat message already (version 2: the model's own message dump; 1.x: role and content); kept as
  they are: content, tool_calls (ids kept: parallel calls), tool_call_id, reasoning_content. What
  the message lacks is taken from `extra.response` (1.x keeps reasoning_content only there; 1.x's
  OpenRouterModel keeps OpenRouter's raw answer, whose reasoning is `message.reasoning`).
- Responses models (`litellm_response`, ...): an assistant message is the whole Responses API
  response (`"object": "response"`): its `output` items, with the `function_call_output` items and
  the system and user messages around them, are read as Responses items (apis/responses_history.py).
- With a text-based model (actions in ``` blocks, no tool calls) the result is a text-based script
  (proxy.replay.text_based): each step is a turn, the observations between them user messages.
- Left out, with a note: the `exit` message that ends a run (1.x: the user message after the last
  model call holding the submission), never sent to the model. A model answer mini rejected
  (FormatError) is not in the conversation mini sent (version 2 keeps it in the error message's
  `extra` only): its error message, a user message, stays, and a note points at it.
"""

from __future__ import annotations

from typing import Any

from proxy.apis.responses_history import items_to_chat
from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Misfit, Reader
from proxy.replay.trajectory import Note

EXPECTED = (
    'a mini-swe-agent trajectory {"trajectory_format": "mini-swe-agent-...", "info": {...}, '
    '"messages": [...]}'
)
CHAT_KEYS = ("role", "content", "tool_calls", "tool_call_id", "reasoning_content")
RESPONSES_KEYS = frozenset({"type", "role", "content", "call_id", "output"})


def miss(doc: Any) -> Misfit | None:
    if not isinstance(doc, dict):
        return Misfit(f"expected {EXPECTED}: the document is not an object")
    fmt = doc.get("trajectory_format")
    info = _object(doc.get("info"))
    # marks only mini has: a plain {"messages": [...]} file counts none
    marks = int(isinstance(fmt, str)) + int("mini_version" in info)
    if not isinstance(doc.get("messages"), list):
        return Misfit(f"expected {EXPECTED}: $.messages is missing", marks)
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return None
    if fmt is None and "exit_status" in info and ("mini_version" in info or "model_stats" in info):
        return None  # 1.x before it wrote trajectory_format
    where = "$.trajectory_format is " + (repr(fmt) if fmt is not None else "missing")
    return Misfit(f"expected {EXPECTED}: {where}", marks)


def convert(doc: Any, filename: str) -> list[Converted]:
    raw: list[Any] = doc["messages"]
    left_out: list[Note] = []
    kept: list[tuple[int, dict[str, Any]]] = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict):
            raise LoadError(filename, index, "message is not a JSON object")
        extra = _object(message.get("extra"))
        if message.get("role") == "exit":
            left_out.append(Note(index, f"{END} (exit_status {extra.get('exit_status')!r})"))
            continue
        if extra.get("interrupt_type") == "FormatError" and "response" in extra:
            left_out.append(Note(index, REJECTED))
        kept.append((index, message))
    info = _object(doc.get("info"))
    last = kept[-1][1] if kept else {}
    if (
        doc.get("trajectory_format", "mini-swe-agent-1") == "mini-swe-agent-1"
        and info.get("exit_status")
        and last.get("role") == "user"
        and last.get("content") in ("", info.get("submission"))
    ):  # 1.x records the end of the run as a user message: the submission, or ""
        left_out.append(Note(kept[-1][0], f"{END} (exit_status {info['exit_status']!r})"))
        kept.pop()
    if any(m.get("object") == "response" or "type" in m for _, m in kept):
        messages, indexes = _responses(kept, filename)
    else:
        messages = [_chat(m, filename, i) for i, m in kept]
        indexes = [i for i, _ in kept]
    return [Converted(messages, indexes, sorted(left_out, key=lambda n: n.index))]


END = "the end of the run: mini records it after the last model call, the model never saw it"
REJECTED = (
    "mini rejected the model's answer here (FormatError): the answer is not in the conversation "
    "mini sent (only in this message's extra), its error message is"
)


def _chat(message: dict[str, Any], filename: str, index: int) -> dict[str, Any]:
    if not isinstance(message.get("role"), str):
        raise LoadError(filename, index, "message has no role")
    out = {k: message[k] for k in CHAT_KEYS if message.get(k) is not None}
    out.setdefault("content", None)
    if out["role"] != "assistant":
        return out
    sent = _response_message(message.get("extra"))
    for key in ("tool_calls", "reasoning_content"):
        if key not in out and sent.get(key):
            out[key] = sent[key]
    if "reasoning_content" not in out and (said := _said_reasoning(message, sent)):
        out["reasoning_content"] = said
    if not out.get("tool_calls"):
        out.pop("tool_calls", None)
    response = (message.get("extra") or {}).get("response")
    if isinstance(response, dict):  # the raw completion litellm returned: what it cost, and when
        out["usage"], out["created"] = response.get("usage"), response.get("created")
    return out


def _said_reasoning(message: dict[str, Any], sent: dict[str, Any]) -> str | None:
    """Reasoning kept elsewhere than reasoning_content: Anthropic's thinking blocks (litellm), or
    OpenRouter's `reasoning` (1.x's OpenRouterModel keeps OpenRouter's raw answer)."""
    blocks = message.get("thinking_blocks") or sent.get("thinking_blocks") or []
    thinking = [b.get("thinking") for b in blocks if isinstance(b, dict)]
    if text := "\n\n".join(t for t in thinking if isinstance(t, str) and t):
        return text
    reasoning = sent.get("reasoning")
    return reasoning if isinstance(reasoning, str) and reasoning else None


def _response_message(extra: Any) -> dict[str, Any]:
    """choices[0].message of the raw chat completion mini kept in `extra.response`."""
    try:
        message = extra["response"]["choices"][0]["message"]
    except (TypeError, KeyError, IndexError):
        return {}
    return message if isinstance(message, dict) else {}


def _responses(
    kept: list[tuple[int, dict[str, Any]]], filename: str
) -> tuple[list[dict[str, Any]], list[int]]:
    items: list[Any] = []
    origin: list[int] = []  # per item: the message it came from
    for index, message in kept:
        if message.get("object") == "response":
            output = message.get("output")
            if not isinstance(output, list):
                raise LoadError(filename, index, "a response message has no output list")
            items.extend(output)
            origin.extend([index] * len(output))
        else:
            items.append({k: v for k, v in message.items() if k in RESPONSES_KEYS})
            origin.append(index)
    try:
        messages, positions = items_to_chat(items, filename)
    except LoadError as exc:
        raise LoadError(filename, origin[exc.index or 0], exc.reason) from None
    return messages, [origin[p] for p in positions]


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


READER = Reader(name="mini-swe-agent", lines=False, miss=miss, convert=convert)
