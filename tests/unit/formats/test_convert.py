"""convert: the script written back as chat JSON loads as the same script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.formats import load_bytes, load_file
from proxy.formats.convert import to_messages
from proxy.replay.trajectory import Trajectory
from tests.conftest import ROOT
from tests.unit.replay.test_rounds import RECORDED as CONVERSATION


def same_script(a: Trajectory, b: Trajectory) -> None:
    assert (a.task, a.system, a.rounds) == (b.task, b.system, b.rounds)
    assert [(t.number, t.round, t.text, t.reasoning) for t in a.turns] == [
        (t.number, t.round, t.text, t.reasoning) for t in b.turns
    ]
    assert [[(c.id, c.name, c.arguments) for c in t.tool_calls] for t in a.turns] == [
        [(c.id, c.name, c.arguments) for c in t.tool_calls] for t in b.turns
    ]
    assert [[u.content for u in (*t.follow_up, *t.users_before)] for t in a.turns] == [
        [u.content for u in (*t.follow_up, *t.users_before)] for t in b.turns
    ]
    assert [u.content for u in a.trailing_users] == [u.content for u in b.trailing_users]
    called = {c.id for t in a.turns for c in t.tool_calls}
    assert {k: v for k, v in a.tool_outputs.items() if k in called} == dict(b.tool_outputs)


RESPONSES_ITEMS: list[Any] = [
    {"role": "developer", "content": "be brief"},
    {"role": "user", "content": "task"},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
    {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": '{"a": 1}'},
    {"type": "function_call", "call_id": "c2", "name": "bash", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "c1", "output": "one"},
    {"type": "function_call_output", "call_id": "c2", "output": "two"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]},
    {"role": "user", "content": "again"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Ok."}]},
]


@pytest.mark.parametrize(
    "source",
    [
        json.dumps(CONVERSATION).encode(),
        json.dumps(RESPONSES_ITEMS).encode(),
        (ROOT / "examples" / "greeting.json").read_bytes(),
    ],
    ids=["chat conversation", "responses items", "bundled example"],
)
def test_the_written_chat_json_loads_as_the_same_script(source: bytes) -> None:
    original = load_bytes(source, name="t", filename="t")
    written = orjson.dumps(to_messages(original))
    again = load_bytes(written, name="t", filename="t.json")
    assert again.format == "chat" and again.skipped == () and again.dropped == ()
    same_script(original, again)


def test_a_recording_converts_too(tmp_path: Path) -> None:
    line = {
        "type": "exchange", "lane": "main", "api": "chat", "status": 200, "error": None,
        "request": {"messages": [{"role": "user", "content": "hi"}]},
        "message": {"role": "assistant", "content": "hello"},
    }  # fmt: skip
    path = tmp_path / "rec.jsonl"
    path.write_bytes(orjson.dumps(line) + b"\n")
    original = load_file(path)
    same_script(original, load_bytes(orjson.dumps(to_messages(original)), name="t", filename="t"))
