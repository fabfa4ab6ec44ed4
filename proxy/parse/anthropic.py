"""A /v1/messages body -> Conversation.

Assistant messages are the replies (tool_use blocks are the calls); tool_result blocks in user
messages are the results, matched by tool_use_id; the text blocks of user messages are user text.
The top-level `system` and `role: "system"` messages before the task are the system prompt.
"""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest
from proxy.replay.content import is_content, text_of
from proxy.replay.conversation import Call, Conversation, Reply, Result, path_of


def parse_anthropic(body: Any) -> Conversation:
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
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be an array", param="tools")
    choice = body.get("tool_choice")
    conv = Conversation(  # positional: keyword arguments cost as much as the rest of __init__
        "anthropic",
        model,
        body.get("stream") is True,
        False,  # include_usage
        tuple(
            t["name"] for t in tools or [] if isinstance(t, dict) and isinstance(t.get("name"), str)
        ),
        isinstance(choice, dict) and choice.get("type") == "none",  # tool_choice_none
        len(messages),  # message_count
    )
    system = body.get("system")
    systems = [text_of(system)] if system else []
    for pos, message in enumerate(messages):
        path = ("messages", pos)
        if not isinstance(message, dict):
            where = path_of(path)
            raise BadRequest(f"{where} must be an object", param=where)
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str):
            where = path_of((*path, "role"))
            raise BadRequest(f"{where} is missing", param=where)
        if not is_content(content):
            where = path_of((*path, "content"))
            raise BadRequest(f"{where} must be a string or an array of blocks", param=where)
        blocks = content if isinstance(content, list) else []
        if role == "assistant":
            reply = Reply(pos, path, "", [], (*path, "content"), pos)
            texts = []
            for k, block in enumerate(blocks):
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    call_id, name = block.get("id"), block.get("name")
                    reply.calls.append(
                        Call(
                            call_id if isinstance(call_id, str) else "",
                            name if isinstance(name, str) else "",
                            "",
                            (*path, "content", k, "id"),
                            (*path, "content", k, "name"),
                        )
                    )
                elif block.get("type") == "text":
                    texts.append(block.get("text") or "")
            reply.text = content if isinstance(content, str) else "\n".join(texts)
            if reply.calls or reply.text.strip():
                conv.replies.append(reply)
            continue
        if role == "system":
            if conv.task is None:
                systems.append(text_of(content))
            continue
        for k, block in enumerate(blocks):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = block.get("tool_use_id")
                if isinstance(call_id, str):
                    output = text_of(block.get("content"))
                    conv.results.append(
                        Result(pos, (*path, "content", k, "content"), call_id, output)
                    )
        text = text_of(content)
        if text:
            conv.users[pos] = text
            if conv.task is None:
                conv.task = text
    conv.system = "\n".join(systems)
    return conv
