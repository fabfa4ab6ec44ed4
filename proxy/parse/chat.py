"""A /v1/chat/completions body -> Conversation.

Only what the decision reads is checked; everything else in the body is left for the upstream.
Type errors in what is read are a BadRequest naming the JSON path.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest
from proxy.replay.content import is_content, text_of
from proxy.replay.conversation import Call, Conversation, Reply, Result, path_of


def parse_chat(body: Any) -> Conversation:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    messages = body.get("messages")
    if messages is None:
        raise BadRequest("'messages' is a required property", param="messages")
    if not isinstance(messages, list):
        raise BadRequest("'messages' must be an array", param="messages")
    model = body.get("model", "")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string", param="model")
    options = body.get("stream_options")
    conv = Conversation(  # positional: keyword arguments cost as much as the rest of __init__
        "chat",
        model,
        body.get("stream") is True,
        isinstance(options, dict) and options.get("include_usage") is True,  # include_usage
        _tool_names(body),
        body.get("tool_choice") == "none",  # tool_choice_none
        len(messages),  # message_count
    )
    systems: list[str] = []
    replies, results, users = conv.replies, conv.results, conv.users
    # the per-message work is what a long history costs: paths stay tuples, plain strings skip
    # text_of, and nothing is built for a message the decision does not read
    for pos, msg in enumerate(messages):
        if not isinstance(msg, dict):
            where = path_of(("messages", pos))
            raise BadRequest(f"{where} must be an object", param=where)
        role = msg.get("role")
        content = msg.get("content")
        if not isinstance(role, str):
            where = path_of(("messages", pos, "role"))
            raise BadRequest(f"{where} is missing", param=where)
        text = content if isinstance(content, str) else _text(pos, content)
        if role == "assistant":
            raw = msg.get("tool_calls")
            calls = _calls(pos, raw) if raw is not None else []
            if calls or text.strip():
                path = ("messages", pos)
                replies.append(Reply(pos, path, text, calls, (*path, "tool_calls"), pos))
        elif role == "tool":
            call_id = msg.get("tool_call_id")
            if isinstance(call_id, str):
                results.append(Result(pos, ("messages", pos, "content"), call_id, text))
        elif role == "user":
            users[pos] = text
            if conv.task is None:
                conv.task = text
        elif role in ("system", "developer") and conv.task is None:
            systems.append(text)
    conv.system = "\n".join(systems)
    return conv


def _text(pos: int, content: Any) -> str:
    if not is_content(content):
        where = path_of(("messages", pos, "content"))
        raise BadRequest(f"{where} must be a string, an array of parts or null", param=where)
    return text_of(content)


def _calls(pos: int, raw: Any) -> list[Call]:
    if not isinstance(raw, list):
        where = path_of(("messages", pos, "tool_calls"))
        raise BadRequest(f"{where} must be an array", param=where)
    calls: list[Call] = []
    for j, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            where = path_of(("messages", pos, "tool_calls", j, "function"))
            raise BadRequest(f"{where} must be an object", param=where)
        call_id, name, args = call.get("id"), fn.get("name"), fn.get("arguments")
        calls.append(
            Call(
                call_id if isinstance(call_id, str) else "",
                name if isinstance(name, str) else "",
                args if isinstance(args, str) else "",
                ("messages", pos, "tool_calls", j, "id"),
                ("messages", pos, "tool_calls", j, "function", "name"),
            )
        )
    return calls


def _tool_names(body: dict[str, Any]) -> tuple[str, ...]:
    tools = body.get("tools")
    if tools is None:
        tools = body.get("functions")  # the legacy form
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be an array", param="tools")
    names: list[str] = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function")
        name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
        if isinstance(name, str):
            names.append(name)
    return tuple(names)
