"""What every API's request body must have before the decision reads it, and the tools it offers:
one rule each, for the OpenAI and Anthropic APIs (Gemini's body has no model: gemini.py)."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.errors import BadRequest, TooDeep
from proxy.nesting import TOO_DEEP, deep_read, too_deep
from proxy.replay.conversation import Where, path_of
from proxy.replay.splice import spliced as spliced  # the one splice rule, for every API


def loads_object(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object: refused when it is not JSON, not an object, or nests
    deeper than anything may walk (proxy.nesting)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if deep_read(exc):
            raise _deep() from None
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    if too_deep(body):
        raise _deep()
    return body


def _deep() -> TooDeep:
    return TooDeep(f"the request body holds {TOO_DEEP}", param="body")


def malformed(path: Where, problem: str) -> BadRequest:
    """A part of the body that is not what the decision needs, named by its JSON path."""
    where = path_of(path)
    return BadRequest(f"{where} {problem}", param=where)


def opened(body: Any, history: str) -> tuple[Any, str]:
    """The body's history field (`messages` or `input`: present, its type is the API's to check)
    and its model (a string, "" when absent)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    items = body.get(history)
    if items is None:
        raise BadRequest(f"'{history}' is a required property", param=history)
    model = body.get("model", "")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string", param="model")
    return items, model


def tool_names(tools: Any) -> tuple[str, ...]:
    """The names of the function tools offered, in the chat form (`function.name`) or the flat one
    (`name`, Responses, Anthropic); Codex's namespace groups and Gemini's functionDeclarations
    groups are looked into."""
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be an array", param="tools")
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            names.extend(tool_names(tool.get("tools")))
            continue
        if isinstance(tool.get("functionDeclarations"), list):
            names.extend(tool_names(tool["functionDeclarations"]))
            continue
        fn = tool.get("function")
        name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
        if isinstance(name, str):
            names.append(name)
    return tuple(names)
