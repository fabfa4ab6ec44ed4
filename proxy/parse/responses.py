"""A /v1/responses body -> Conversation.

The history is the `input` list: consecutive assistant-side items (reasoning, an assistant
message, function calls, item references) are one assistant reply; function_call_output items are
tool results, matched by call_id. An item with a role and no type is a message. `instructions`
and system or developer messages before the task are the system prompt.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest
from proxy.formats.responses import ASSISTANT_SIDE  # one rule for what makes up a reply
from proxy.replay.content import text_of
from proxy.replay.conversation import Call, Conversation, Reply, Result, path_of


def parse_responses(body: Any) -> Conversation:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    items = body.get("input")
    if items is None:
        raise BadRequest("'input' is a required property", param="input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise BadRequest("'input' must be a string or an array of items", param="input")
    model = body.get("model", "")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string", param="model")
    choice = body.get("tool_choice")
    conv = Conversation(  # positional: keyword arguments cost as much as the rest of __init__
        "responses",
        model,
        body.get("stream") is True,
        False,  # include_usage
        tool_names(body.get("tools")),
        choice == "none" or (isinstance(choice, dict) and choice.get("type") == "none"),
        len(items),  # message_count
    )
    instructions = body.get("instructions")
    systems = [instructions] if isinstance(instructions, str) and instructions else []
    reply: Reply | None = None
    for pos, item in enumerate(items):
        path = ("input", pos)
        if not isinstance(item, dict):
            where = path_of(path)
            raise BadRequest(f"{where} must be an object", param=where)
        kind = item.get("type", "message" if "role" in item else None)
        role = item.get("role")
        if kind in ASSISTANT_SIDE or (kind == "message" and role == "assistant"):
            if reply is None:
                reply = Reply(pos, path, "", [], ("input", f"[{pos}:]"), pos)
                conv.replies.append(reply)
            reply.end = pos
            if kind == "function_call":
                call_id, name, args = item.get("call_id"), item.get("name"), item.get("arguments")
                reply.calls.append(
                    Call(
                        call_id if isinstance(call_id, str) else "",
                        name if isinstance(name, str) else "",
                        args if isinstance(args, str) else "",
                        (*path, "call_id"),
                        (*path, "name"),
                    )
                )
            elif kind == "message":
                reply.text = "\n".join(t for t in (reply.text, text_of(item.get("content"))) if t)
            continue
        reply = None
        if kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if isinstance(call_id, str):
                conv.results.append(Result(pos, (*path, "output"), call_id, text_of(output)))
        elif kind == "message":
            text = text_of(item.get("content"))
            if role in ("system", "developer"):
                if conv.task is None:
                    systems.append(text)
            elif role == "user":
                conv.users[pos] = text
                if conv.task is None:
                    conv.task = text
    conv.replies = [r for r in conv.replies if r.calls or r.text.strip()]
    conv.system = "\n".join(systems)
    return conv


def tool_names(tools: Any) -> tuple[str, ...]:
    """Function tools in the flat Responses form or the chat form; Codex's namespace groups too."""
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
        fn = tool.get("function")
        name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
        if isinstance(name, str):
            names.append(name)
    return tuple(names)
