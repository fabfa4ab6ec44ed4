"""A fifth API, small on purpose, made only for the test that a new API is one module and one row
(tests/wire/apis/test_fifth_api.py). It is what a maintainer adding an API writes: how a request
is read into a Conversation, how a scripted turn is written (JSON and a stream), where user
messages are spliced, how an answer is read back, its history as chat messages and its error
shape. Nothing else in the proxy learns about it: the row below is handed to create_app.

The wire shape, invented for the test:

    POST /v1/plain   {"model", "stream", "tools": ["bash"], "turns": [
                        {"role": "system" | "user", "text"},
                        {"role": "agent", "text", "calls": [{"id", "name", "args"}]},
                        {"role": "tool", "id", "output"}]}
    answer           {"id", "model", "text", "calls": [...], "done": "calls" | "text"}
    stream           data: {"text"} / data: {"call": {...}} ... / data: {"done"} / data: [END]
    error            {"problem": {"status", "detail"}}
    credentials      x-plain-key: KEY
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from proxy.apis import Api, FileShape
from proxy.apis.readback import Assembled, sse_events
from proxy.apis.request import malformed, opened, spliced
from proxy.replay.content import text_of
from proxy.replay.conversation import Call, Conversation, Reply, Result, fold_greeting
from proxy.replay.splice import Insertion
from proxy.replay.trajectory import Turn
from proxy.upstream.dialect import COMMON, Dialect

PATH = "/v1/plain"
KEY_HEADER = "x-plain-key"


def parse(body: Any) -> Conversation:
    turns, model = opened(body, "turns")
    if not isinstance(turns, list):
        raise malformed(("turns",), "must be an array")
    tools = body.get("tools") or []
    conv = Conversation(
        "plain", model, body.get("stream") is True, False, tuple(tools), False, len(turns)
    )
    systems: list[str] = []
    for pos, turn in enumerate(turns):
        path = ("turns", pos)
        if not isinstance(turn, dict) or not isinstance(turn.get("role"), str):
            raise malformed(path, "must be an object with a role")
        role, text = turn["role"], str(turn.get("text") or "")
        if role == "agent":
            calls = [
                Call(c["id"], c["name"], c["args"], (*path, "calls", j, "id"), (*path, "calls", j))
                for j, c in enumerate(turn.get("calls") or [])
            ]
            conv.replies.append(Reply(pos, path, text, calls, (*path, "calls"), pos))
        elif role == "tool":
            conv.results.append(Result(pos, (*path, "output"), turn["id"], turn["output"]))
        elif role == "user":
            conv.users[pos] = text
            conv.task = text if conv.task is None else conv.task
        elif role == "system":
            systems.append(text)
    conv.system = "\n".join(systems)
    return fold_greeting(conv)


def _calls(turn: Turn) -> list[dict[str, str]]:
    return [{"id": c.id, "name": c.name, "args": c.arguments} for c in turn.tool_calls]


def whole(turn: Turn, conv: Conversation, body: dict[str, Any], key: str) -> bytes:
    done = "calls" if turn.tool_calls else "text"
    answer = {"id": f"plain-{key}", "model": conv.model, "text": turn.text, "calls": _calls(turn)}
    return orjson.dumps({**answer, "done": done})


def stream(turn: Turn, conv: Conversation, body: dict[str, Any], key: str) -> list[bytes]:
    events = [{"text": turn.text}, *({"call": c} for c in _calls(turn))]
    events.append({"done": "calls" if turn.tool_calls else "text"})
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
        done = next(p["done"] for p in parts if "done" in p)
    else:
        events = None
        answer = orjson.loads(raw)
        text, calls, done = answer["text"], answer["calls"], answer["done"]
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["args"]}}
            for c in calls
        ]  # fmt: skip
    return Assembled(message, "tool_calls" if done == "calls" else "stop", None, events)


def to_chat(turns: Sequence[Any], source: str, body: dict[str, Any]) -> tuple[list[Any], list[int]]:
    """Its history as chat messages, each with the index of the turn it came from."""
    out: list[Any] = []
    for turn in turns:
        role = turn["role"]
        if role == "agent":
            answer = {"text": turn.get("text") or "", "calls": turn.get("calls") or []}
            out.append(read_answer(orjson.dumps({**answer, "done": ""}), False).message)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": turn["id"], "content": turn["output"]})
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
)
