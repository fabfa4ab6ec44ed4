"""A fifth API, small on purpose, made only for the test that a new API is one module and one row
(tests/wire/apis/test_fifth_api.py). It is what a maintainer adding an API writes: how a request
is read into a Conversation, how a scripted turn is written (JSON and a stream), where user
messages are spliced, how an answer is read back, its history as chat messages, its usage, its
error shape and its key header. Nothing else in the proxy learns about it: the row below is handed
to create_app.

The wire shape, invented for the test:

    POST /v1/plain   {"model", "stream", "tools": ["bash"], "turns": [
                        {"role": "system" | "user", "text"},
                        {"role": "agent", "text", "calls": [{"id"?, "name", "args"}]},
                        {"role": "tool", "id"? , "name"?, "output"}]}
    answer           {"id", "model", "text", "calls": [...], "done": "calls" | "text",
                      "spent": {"in", "out"}}
    stream           data: {"text"} / data: {"call": {...}} ... / data: {"done", "spent"} /
                     data: [END]
    error            {"problem": {"status", "detail"}}
    credentials      x-plain-key: KEY

A call may come without an id (as the Gemini API allows): its result then names the call's tool,
and answers the oldest unanswered call of that name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from proxy.apis import Api, FileShape
from proxy.apis.idless import Unanswered, made_up_id
from proxy.apis.keys import COMMON
from proxy.apis.readback import Assembled, sse_events
from proxy.apis.request import malformed, opened, spliced
from proxy.replay.content import text_of
from proxy.replay.conversation import NO_ID, Call, Conversation, Reply, Result, fold_greeting
from proxy.replay.splice import Insertion
from proxy.replay.trajectory import Turn, Usage
from proxy.replay.usage import NO_USAGE, token_count
from proxy.upstream.dialect import Dialect

PATH = "/v1/plain"
KEY_HEADER = "x-plain-key"
MADE_UP = "plain_"  # the start of an id its reading makes up for a call that came without one


def parse(body: Any) -> Conversation:
    turns, model = opened(body, "turns")
    if not isinstance(turns, list):
        raise malformed(("turns",), "must be an array")
    tools = body.get("tools") or []
    conv = Conversation(
        "plain", model, body.get("stream") is True, False, tuple(tools), False, len(turns)
    )
    systems: list[str] = []
    unanswered = Unanswered()
    for pos, turn in enumerate(turns):
        path = ("turns", pos)
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str):
            raise malformed(path, "must be an object with a role")
        role, text = turn["role"], str(turn.get("text") or "")
        if role == "agent":
            calls = []
            for j, c in enumerate(turn.get("calls") or []):
                ident = c.get("id") or f"{NO_ID}{pos}.{j}"  # id-less: matched by its name
                at = (*path, "calls", j)
                calls.append(Call(ident, c["name"], c["args"], (*at, "id"), (*at, "name")))
                unanswered.add(c["name"], ident)
            conv.replies.append(Reply(pos, path, text, calls, (*path, "calls"), pos))
        elif role == "tool":
            answered = unanswered.answer(turn)
            conv.results.append(Result(pos, (*path, "output"), answered, turn["output"]))
        elif role == "user":
            conv.users[pos] = text
            conv.task = text if conv.task is None else conv.task
        elif role == "system":
            systems.append(text)
    conv.system = "\n".join(systems)
    return fold_greeting(conv)


def _calls(turn: Turn) -> list[dict[str, str]]:
    """A call that came without an id goes out without one again: the id was made up."""
    return [
        {"name": c.name, "args": c.arguments}
        if c.id.startswith(MADE_UP)
        else {"id": c.id, "name": c.name, "args": c.arguments}
        for c in turn.tool_calls
    ]


def _spent(turn: Turn) -> dict[str, int]:
    usage = turn.usage or NO_USAGE
    return {"in": usage.input, "out": usage.output}


def whole(turn: Turn, conv: Conversation, body: dict[str, Any], key: str) -> bytes:
    done = "calls" if turn.tool_calls else "text"
    answer = {"id": f"plain-{key}", "model": conv.model, "text": turn.text, "calls": _calls(turn)}
    return orjson.dumps({**answer, "done": done, "spent": _spent(turn)})


def stream(turn: Turn, conv: Conversation, body: dict[str, Any], key: str) -> list[bytes]:
    events = [{"text": turn.text}, *({"call": c} for c in _calls(turn))]
    events.append({"done": "calls" if turn.tool_calls else "text", "spent": _spent(turn)})
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in events] + [b"data: [END]\n\n"]


def splice(turns: list[Any], plan: tuple[Insertion, ...]) -> list[Any]:
    def put(out: list[Any], group: list[Insertion]) -> None:
        for insertion in reversed(group):
            out.extend({"role": "user", "text": text_of(u.content)} for u in insertion.users)

    return spliced(turns, plan, put)


def read_answer(raw: bytes, stream: bool) -> Assembled:
    if stream:
        events = sse_events(raw)
        parts = [orjson.loads(e.removeprefix("data: ")) for e in events if e != "data: [END]"]
        text = "".join(p.get("text", "") for p in parts)
        calls = [p["call"] for p in parts if "call" in p]
        end = next(p for p in parts if "done" in p)
    else:
        events = None
        end = orjson.loads(raw)
        text, calls = end["text"], end["calls"]
    message = _message(text, calls, 0)
    return Assembled(
        message, "tool_calls" if end["done"] == "calls" else "stop", end.get("spent"), events
    )


def _message(text: str, calls: list[dict[str, Any]], at: int) -> dict[str, Any]:
    """An agent turn as a chat message; a call without an id gets one from its place."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": c.get("id") or made_up_id(MADE_UP, (at, j), c["name"]), "type": "function",
             "function": {"name": c["name"], "arguments": c["args"]}}
            for j, c in enumerate(calls)
        ]  # fmt: skip
    return message


def read_usage(value: dict[str, Any]) -> Usage | None:
    if "in" not in value and "out" not in value:
        return None
    return Usage(token_count(value.get("in")), token_count(value.get("out")))


def to_chat(turns: Sequence[Any], source: str, body: dict[str, Any]) -> tuple[list[Any], list[int]]:
    """Its history as chat messages, each with the index of the turn it came from."""
    out: list[Any] = []
    unanswered = Unanswered()
    for at, turn in enumerate(turns):
        role = turn["role"]
        if role == "agent":
            message = _message(turn.get("text") or "", turn.get("calls") or [], at)
            for call in message.get("tool_calls", []):
                unanswered.add(call["function"]["name"], call["id"])
            out.append(message)
        elif role == "tool":
            answered = unanswered.answer(turn)
            out.append({"role": "tool", "tool_call_id": answered, "content": turn["output"]})
        else:
            out.append({"role": role, "content": turn.get("text") or ""})
    return out, list(range(len(out)))


def error_body(body: dict[str, Any], status: int) -> dict[str, Any]:
    return {"problem": {"status": status, "detail": body["error"]["message"]}}


PLAIN = Api(
    name="plain",
    title="The plain test API",
    paths=(PATH,),
    documented=(PATH,),
    history="turns",
    parse=parse,
    stream=stream,
    whole=whole,
    splice=splice,
    clean=lambda _: None,
    read_answer=read_answer,
    file=FileShape(lambda _: False, None, to_chat),  # recordings only: no trajectory files
    error_body=error_body,
    error_shape="plain",
    # its own key header: the proxy's key goes there, and a client's is never written down
    upstream=Dialect(key_header=KEY_HEADER.encode(), credentials=COMMON | {KEY_HEADER.encode()}),
    usage_field="spent",
    read_usage=read_usage,
    made_up=MADE_UP,
)
