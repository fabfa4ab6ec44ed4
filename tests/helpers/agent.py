"""An agent loop as a harness runs it, with the official openai SDK as its client."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai

SYSTEM = "You are a careful coding agent."
TASK = "Create notes.txt, then list the directory."
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


def bash(call_id: str, command: str) -> dict[str, Any]:
    args = json.dumps({"command": command})
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": args}}


# a recorded run: two tool turns, reasoning in <think>, user messages between them and trailing
RECORDED = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": TASK},
    {
        "role": "assistant",
        "content": "<think>first the file</think>Creating it.",
        "tool_calls": [bash("call_A", "touch notes.txt")],
    },
    {"role": "tool", "tool_call_id": "call_A", "content": ""},
    {"role": "user", "content": "Remember to use ls -la."},
    {"role": "assistant", "content": None, "tool_calls": [bash("call_B", "ls -la")]},
    {"role": "tool", "tool_call_id": "call_B", "content": "notes.txt"},
    {"role": "user", "content": "Now summarise what you did."},
]


def client(base_url: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=base_url, api_key="sk-client-key", max_retries=0, default_headers=headers
    )


def start_messages() -> list[dict[str, Any]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]


def agent_step(
    c: openai.OpenAI, messages: list[dict[str, Any]], *, stream: bool
) -> tuple[Any, dict[str, str]]:
    """One call as a harness makes it; returns the assembled assistant message and the headers."""
    if stream:
        raw = c.chat.completions.with_raw_response.create(
            model="gpt-test",
            messages=messages,
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
        content, calls, finish, usage = "", {}, None, None
        for chunk in raw.parse():
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                content += choice.delta.content or ""
                for d in choice.delta.tool_calls or []:
                    entry = calls.setdefault(
                        d.index, {"id": d.id, "name": d.function.name, "arguments": ""}
                    )
                    entry["arguments"] += d.function.arguments or ""
                finish = choice.finish_reason or finish
        message = {
            "role": "assistant",
            "content": content or None,
            "tool_calls": [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in calls.values()
            ],
            "finish": finish,
            "usage": usage,
        }
        return message, dict(raw.headers)
    raw = c.chat.completions.with_raw_response.create(
        model="gpt-test", messages=messages, tools=TOOLS
    )
    completion = raw.parse()
    msg = completion.choices[0].message
    message = {
        "role": "assistant",
        "content": msg.content,
        "tool_calls": [tc.model_dump() for tc in msg.tool_calls or []],
        "finish": completion.choices[0].finish_reason,
        "reasoning": getattr(msg, "reasoning_content", None),
    }
    return message, dict(raw.headers)


def ran(call: dict[str, Any]) -> str:
    return f"ran {call['function']['arguments']}"


def follow(
    messages: list[dict[str, Any]],
    message: dict[str, Any],
    output: Callable[[dict[str, Any]], str | None] = ran,
) -> None:
    """Append the assistant message and a tool result per call (None: the result never came)."""
    messages.append(
        {"role": "assistant", "content": message["content"], "tool_calls": message["tool_calls"]}
    )
    for call in message["tool_calls"]:
        result = output(call)
        if result is not None:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


def scripted_session(root: str) -> dict[str, Any]:
    """The status of the one session that has a script (side-call sessions have none)."""
    sessions = httpx.get(root + "/replay/sessions").json()["data"]
    [main] = [s for s in sessions if s["script"] is not None]
    return dict(main)
