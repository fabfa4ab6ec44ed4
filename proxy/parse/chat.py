"""A /v1/chat/completions body -> Conversation.

Only what the decision reads is checked; everything else in the body is left for the upstream.
Type errors in what is read are a BadRequest naming the JSON path.
"""

from __future__ import annotations

from typing import Any

from proxy.content import is_content, text_of
from proxy.conversation import Call, Conversation, Reply, Result
from proxy.errors import BadRequest


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
    conv = Conversation(
        api="chat",
        model=model,
        stream=body.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        tools=_tool_names(body),
        tool_choice_none=body.get("tool_choice") == "none",
        system="",
        task=None,
        message_count=len(messages),
    )
    systems: list[str] = []
    for pos, msg in enumerate(messages):
        path = f"messages[{pos}]"
        if not isinstance(msg, dict):
            raise BadRequest(f"{path} must be an object", param=path)
        role = msg.get("role")
        content = msg.get("content")
        if not isinstance(role, str):
            raise BadRequest(f"{path}.role is missing", param=f"{path}.role")
        if not is_content(content):
            raise BadRequest(
                f"{path}.content must be a string, an array of parts or null",
                param=f"{path}.content",
            )
        if role in ("system", "developer"):
            if conv.task is None:
                systems.append(text_of(content))
        elif role == "user":
            text = text_of(content)
            conv.users[pos] = text
            if conv.task is None:
                conv.task = text
        elif role == "assistant":
            reply = _reply(msg, pos, path, content)
            if reply.calls or reply.text.strip():
                conv.replies.append(reply)
        elif role == "tool":
            call_id = msg.get("tool_call_id")
            if isinstance(call_id, str):
                conv.results.append(Result(pos, f"{path}.content", call_id, text_of(content)))
    conv.system = "\n".join(systems)
    return conv


def _reply(msg: dict[str, Any], pos: int, path: str, content: Any) -> Reply:
    calls: list[Call] = []
    raw = msg.get("tool_calls")
    if raw is not None:
        if not isinstance(raw, list):
            raise BadRequest(f"{path}.tool_calls must be an array", param=f"{path}.tool_calls")
        for j, call in enumerate(raw):
            where = f"{path}.tool_calls[{j}]"
            fn = call.get("function") if isinstance(call, dict) else None
            if not isinstance(fn, dict):
                raise BadRequest(f"{where}.function must be an object", param=f"{where}.function")
            call_id, name, args = call.get("id"), fn.get("name"), fn.get("arguments")
            calls.append(
                Call(
                    call_id if isinstance(call_id, str) else "",
                    name if isinstance(name, str) else "",
                    args if isinstance(args, str) else "",
                    f"{where}.id",
                    f"{where}.function.name",
                )
            )
    return Reply(pos, path, text_of(content), calls, f"{path}.tool_calls")


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
