"""Gemini API `contents` -> chat messages, so one set of skip rules serves every API.

A `model` content's text parts, thought parts (`"thought": true`) and functionCall parts become
content, reasoning_content and tool calls; each functionResponse part of a `user` content becomes
a tool message; the rest of a user content's text stays a user message. A call without an `id`
(the Gemini API does not require one) gets a deterministic id from its place, and the
functionResponse that answers it (the next one of that name) gets the same id. `systemInstruction`
is the system prompt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from proxy.apis.idless import Unanswered, made_up_id
from proxy.errors import LoadError
from proxy.replay.trajectory import DISPATCH, Usage, dispatch_of
from proxy.replay.usage import token_count

MARKERS = frozenset({"functionCall", "functionResponse"})

# a functionCall part's field its harness needs back: the signature of the thinking behind it,
# which Gemini 3 wants with the call in the history (else a 400 once the session goes live)
DISPATCH_FIELDS = ("thoughtSignature",)


def read_usage(value: dict[str, Any]) -> Usage | None:
    """A Gemini usageMetadata, whose thoughts are counted apart from the candidates; None when
    `value` is not one."""
    if "promptTokenCount" not in value and "candidatesTokenCount" not in value:
        return None
    thoughts = token_count(value.get("thoughtsTokenCount"))
    return Usage(
        token_count(value.get("promptTokenCount")),
        token_count(value.get("candidatesTokenCount")) + thoughts,
        token_count(value.get("cachedContentTokenCount")),
        0,
        thoughts,
    )


def looks_like_gemini(contents: Sequence[Any]) -> bool:
    return any(
        isinstance(c, dict)
        and isinstance(c.get("parts"), list)
        and c.get("role") in ("user", "model")
        for c in contents
    )


def holds(doc: dict[str, Any]) -> bool:
    """A trajectory file's object in the Gemini API's request shape ({"contents", ...})."""
    contents = doc.get("contents")
    return isinstance(contents, list) and looks_like_gemini(contents)


def read(
    contents: Sequence[Any], filename: str, doc: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[int]]:
    """A trajectory file's contents (and the object's systemInstruction) as chat messages."""
    return contents_to_chat(contents, filename, system=doc.get("systemInstruction"))


def parts_text(parts: Any, *, thought: bool = False) -> str:
    """The text of a list of parts: the visible text, or (thought=True) the thoughts."""
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        p["text"]
        for p in parts
        if isinstance(p, dict)
        and isinstance(p.get("text"), str)
        and bool(p.get("thought")) is thought
    )


MADE_UP = "gemini_"  # the start of an id made for a functionCall that came without one


def call_id(position: tuple[int, int], name: str) -> str:
    """The id of a functionCall that has none: from its place (content, part) and name."""
    return made_up_id(MADE_UP, position, name)


def contents_to_chat(
    contents: Sequence[Any], filename: str, *, system: Any = None
) -> tuple[list[dict[str, Any]], list[int]]:
    """Chat messages and, for each, the index of the content it came from (-1: the system)."""
    out: list[dict[str, Any]] = []
    indexes: list[int] = []
    text = parts_text(system.get("parts")) if isinstance(system, dict) else None
    if isinstance(system, str):
        text = system
    if text:
        out.append({"role": "system", "content": text})
        indexes.append(-1)
    unanswered = Unanswered()
    for index, content in enumerate(contents):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            raise LoadError(filename, index, "a content must be an object with a parts list")
        parts = content["parts"]
        if content.get("role") == "model":
            message: dict[str, Any] = {"role": "assistant", "content": parts_text(parts)}
            thought = parts_text(parts, thought=True)
            if thought:
                message["reasoning_content"] = thought
            calls = []
            for k, part in enumerate(parts):
                call = part.get("functionCall") if isinstance(part, dict) else None
                if not isinstance(call, dict):
                    continue
                name = call.get("name")
                if not isinstance(name, str) or not name:
                    raise LoadError(filename, index, f"parts[{k}].functionCall has no name")
                given = call.get("id")
                ident = given if isinstance(given, str) and given else call_id((index, k), name)
                args = call.get("args")
                made: dict[str, Any] = {
                    "id": ident,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": json.dumps(args if args is not None else {}),
                    },
                }
                if (dispatch := dispatch_of("gemini", DISPATCH_FIELDS, part)) is not None:
                    made[DISPATCH] = dispatch  # its thoughtSignature, on the part beside it
                calls.append(made)
                unanswered.add(name, ident)
            if calls:
                message["tool_calls"] = calls
            out.append(message)
            indexes.append(index)
            continue
        texts = []
        for part in parts:
            if not isinstance(part, dict):
                continue
            response = part.get("functionResponse")
            if isinstance(response, dict):
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": unanswered.answer(response),
                        "content": response_text(response.get("response")),
                    }
                )
                indexes.append(index)
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                texts.append(part["text"])
        if texts:
            out.append({"role": "user", "content": "\n".join(texts)})
            indexes.append(index)
    return out, indexes


def response_text(response: Any) -> str:
    """A functionResponse's response as tool output text: {"output": text} is the text."""
    if (
        isinstance(response, dict)
        and set(response) == {"output"}
        and isinstance(response["output"], str)
    ):
        return response["output"]
    return json.dumps(response)
