"""OpenAI Responses API input items -> chat messages, so one set of skip rules serves every API.

Consecutive assistant-side items (reasoning, an assistant message, function calls) form one
assistant message, unless the file records them as separate model calls: an item that carries
its own token ids (`generation_token_ids`, as NeMo-Gym writes them for training), or a reasoning
item, after another that did starts a new one. The call's token fields, and the OpenAI logprobs of
its output_text parts, go onto the assistant message (proxy.replay.tokens reads them there). `function_call_output` becomes a tool message
matched by `call_id` (a call without one gets its deterministic id from the chat loader, and an
output without one answers it); an item with a `role` and no `type` is a message. Each chat
message remembers the index of the item it came from, so errors and notes point into the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proxy.errors import LoadError
from proxy.replay.content import appended, text_of
from proxy.replay.tokens import EXPERTS, GENERATION, LOG_PROBS, LOGPROBS, PROMPT
from proxy.replay.trajectory import DISPATCH, Usage, dispatch_of
from proxy.replay.usage import nested, token_count

# on an assistant message: the file records it as a model call of its own (formats/chat.py)
OWN_CALL = GENERATION
# what an item that ends a model call carries of the call's tokens (proxy.replay.tokens)
TOKEN_ITEM_FIELDS = (PROMPT, GENERATION, LOG_PROBS, EXPERTS)
ASSISTANT_SIDE = frozenset({"reasoning", "function_call", "item_reference"})
RESPONSES_ONLY = frozenset({"function_call", "function_call_output", "reasoning", "item_reference"})

# a function_call item's fields its harness dispatches it by: Codex's tool namespaces
# (multi_agent_v1, mcp__<server>), what ran it (`caller`: direct, or a program) and whether it
# runs asynchronously
DISPATCH_FIELDS = ("namespace", "caller", "async")


def holds(doc: dict[str, Any]) -> bool:
    """A trajectory file's object in the Responses API's request shape ({"input": [...], ...})."""
    return isinstance(doc.get("input"), list)


def marks(item: dict[str, Any]) -> bool:
    """An item of a bare list that only Responses input items hold (function_call...)."""
    return item.get("type") in RESPONSES_ONLY


def read(
    items: Sequence[Any], filename: str, doc: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[int]]:
    """A trajectory file's items (and the object's instructions) as chat messages."""
    return items_to_chat(items, filename, instructions=doc.get("instructions"))


def read_usage(value: dict[str, Any]) -> Usage | None:
    """A Responses usage (input and output tokens, with their details); None when `value` is not
    one."""
    if "input_tokens" not in value and "output_tokens" not in value:
        return None
    return Usage(
        token_count(value.get("input_tokens")),
        token_count(value.get("output_tokens")),
        token_count(nested(value, "input_tokens_details", "cached_tokens")),
        0,
        token_count(nested(value, "output_tokens_details", "reasoning_tokens")),
    )


def items_to_chat(
    items: Sequence[Any], filename: str, *, instructions: str | None = None
) -> tuple[list[dict[str, Any]], list[int]]:
    """Chat messages and, for each, the index of the item it came from (-1: instructions)."""
    messages: list[dict[str, Any]] = []
    indexes: list[int] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
        indexes.append(-1)
    current: dict[str, Any] | None = None  # the assistant message being put together
    texts: list[str] | None = None  # its message items' texts, joined once it is complete
    generated = False  # whether an item of `current` carried its model call's token ids
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise LoadError(filename, index, _not_an_item(item))
        kind = item.get("type", "message" if "role" in item else None)
        if (kind == "message" and item.get("role") == "assistant") or kind in ASSISTANT_SIDE:
            call = OWN_CALL in item
            # the next model call: an item with its own token ids, or a reasoning item (a call's
            # first item) once the current call's token-bearing item has come
            if current is not None and generated and (call or kind == "reasoning"):
                if texts is not None:
                    current["content"] = appended(texts, "\n")
                    texts = None
                current = None
            if current is None:
                current = {"role": "assistant", "content": None}
                messages.append(current)
                indexes.append(index)
                generated = False
            if not generated:  # the chat loader tells separate model calls apart by them
                current.update((k, item[k]) for k in TOKEN_ITEM_FIELDS if k in item)
            generated = generated or call
            if kind == "message":
                if texts is None:
                    texts = []
                texts.append(text_of(content_parts(item.get("content"))))
                if entries := _logprobs(item.get("content")):  # OpenAI's, kept as recorded
                    current.setdefault(LOGPROBS, {"content": []})["content"].extend(entries)
            else:
                _into_assistant(current, kind, item, filename, index)
            continue
        if current is not None and texts is not None:
            current["content"] = appended(texts, "\n")
            texts = None
        current = None
        if kind == "message":
            role = item.get("role")
            if not isinstance(role, str):
                raise LoadError(filename, index, "message item has no role")
            messages.append({"role": role, "content": content_parts(item.get("content"))})
        elif kind == "function_call_output":
            output, call_id = item.get("output"), item.get("call_id")
            message = {"role": "tool", "content": text_of(output)}
            if isinstance(call_id, str) and call_id:
                message["tool_call_id"] = call_id
            messages.append(message)
        else:
            messages.append({"role": f"<{kind} item>", "content": None})  # reported as skipped
        indexes.append(index)
    if current is not None and texts is not None:
        current["content"] = appended(texts, "\n")
    return messages, indexes


def _into_assistant(
    message: dict[str, Any], kind: str, item: dict[str, Any], filename: str, index: int
) -> None:
    if kind == "reasoning":
        parts = [s.get("text", "") for s in item.get("summary") or [] if isinstance(s, dict)]
        parts += [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
        if any(parts):
            message["reasoning_content"] = "\n\n".join(p for p in parts if p)
    elif kind == "function_call":
        name, call_id = item.get("name"), item.get("call_id")
        if not isinstance(name, str) or not name:
            raise LoadError(filename, index, "function_call item has no name")
        call: dict[str, Any] = {
            "type": "function",
            "function": {"name": name, "arguments": item.get("arguments")},
        }
        if isinstance(call_id, str) and call_id:
            call["id"] = call_id
        if (dispatch := dispatch_of("responses", DISPATCH_FIELDS, item)) is not None:
            call[DISPATCH] = dispatch  # its namespace: served with it over this API
        message.setdefault("tool_calls", []).append(call)


def _not_an_item(item: Any) -> str:
    if isinstance(item, list):
        return (
            "is a list, not an item: a list of lists of items (each a transition of the run) "
            "does not say which of them is the conversation, so it is not read"
        )
    return "item is not a JSON object"


def _logprobs(content: Any) -> list[Any]:
    """The OpenAI logprob entries of a message item's output_text parts."""
    if not isinstance(content, list):
        return []
    return [
        entry
        for p in content
        if isinstance(p, dict) and isinstance(p.get(LOGPROBS), list)
        for entry in p[LOGPROBS]
    ]


def content_parts(content: Any) -> Any:
    """Responses content parts (input_text, output_text) read as chat text parts."""
    if isinstance(content, list):
        return [
            {"type": "text", "text": p.get("text", "")}
            for p in content
            if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
        ]
    return content
