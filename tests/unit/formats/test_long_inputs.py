"""Readers on inputs of many consecutive pieces (message items, blocks, system messages, calls):
the result is what it always was (the same separators, the same empty texts left out), and a long
input is read in linear time. Each long case would take minutes if a piece were added to a growing
string or looked for in a growing list; read in one pass it takes a fraction of a second."""

from __future__ import annotations

import json
from typing import Any

import orjson

from proxy.apis.gemini_history import contents_to_chat
from proxy.apis.responses_history import items_to_chat
from proxy.formats import load_bytes, read_with
from proxy.formats.harness_logs import claude_code, codex
from proxy.formats.harness_logs.reader import Converted
from proxy.replay.content import appended

LONG = 20_000  # pieces of a kilobyte: 20 MB, which a quadratic join copies a thousand times over


def kilobyte(i: int) -> str:
    return f"{i:06d}" + "x" * 994


def said(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def bash(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "bash", "arguments": "{}"}


def test_appended_is_adding_each_text_to_the_last() -> None:
    for texts in (["", "a", "", "b", ""], ["a"], ["", ""], [], ["a", "b"]):
        added = ""
        for text in texts:
            added = f"{added}\n{text}" if added else text
        assert appended(texts, "\n") == added


# ---- Responses items


def test_a_replys_message_items_join_from_the_first_non_empty_text() -> None:
    items = [
        {"role": "user", "content": "task"},
        said(""),
        said("first"),
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hm"}]},
        said(""),
        said("second"),
        bash("c1"),
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        said(""),  # a reply of empty texts only: "", not None
        {"role": "user", "content": "more"},
        bash("c2"),  # no message item: None
    ]
    chat, indexes = items_to_chat(items, "r")
    assert [m.get("content") for m in chat if m["role"] == "assistant"] == [
        "first\n\nsecond",  # the empty text after the first is kept, as it always was
        "",
        None,
    ]
    assert chat[1]["reasoning_content"] == "hm" and indexes == [0, 1, 7, 8, 9, 10]


def test_a_reply_of_many_message_items_is_read_in_one_pass() -> None:
    items: list[Any] = [{"role": "user", "content": "task"}]
    items += [said(kilobyte(i)) for i in range(LONG)]
    items.append(bash("c1"))
    t = load_bytes(orjson.dumps({"input": items}), name="r", filename="r.json")
    [turn] = t.turns
    lines = turn.text.split("\n")
    assert len(lines) == LONG and lines[0] == kilobyte(0) and lines[-1] == kilobyte(LONG - 1)
    assert [c.id for c in turn.tool_calls] == ["c1"]


# ---- Codex rollouts


def rollout(items: list[Any]) -> list[tuple[int, Any]]:
    meta = {"type": "session_meta", "payload": {"base_instructions": {"text": "sys"}}}
    task = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "task"}]}
    lines = [meta, *({"type": "response_item", "payload": i} for i in (task, *items))]
    return list(enumerate(lines))


def thought(text: str) -> dict[str, Any]:
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}]}


def assistant(converted: list[Converted]) -> list[dict[str, Any]]:
    [c] = converted
    return [m for m in c.messages if m["role"] == "assistant"]


def test_codex_joins_a_responses_texts_and_summaries_as_before() -> None:
    items = [said(""), said("first"), thought("why"), said(""), thought("how"), said("second")]
    items += [bash("c1"), {"type": "function_call_output", "call_id": "c1", "output": "ok"}]
    items += [said(""), bash("c2")]  # only an empty text: a message of calls only
    first, second = assistant(codex.convert(rollout(items), "x.jsonl"))
    assert first["content"] == "first\n\nsecond"  # from the first non-empty text on
    assert first["reasoning_content"] == "why\n\nhow"
    assert list(first) == ["role", "content", "reasoning_content", "tool_calls"]
    assert second["content"] is None and "reasoning_content" not in second


def test_codex_reads_a_response_of_many_items_in_one_pass() -> None:
    items: list[Any] = []
    for i in range(LONG // 2):
        items += [said(kilobyte(i)), thought(kilobyte(i))]
    [message] = assistant(codex.convert(rollout(items), "x.jsonl"))
    assert message["content"] == "\n".join(kilobyte(i) for i in range(LONG // 2))
    assert message["reasoning_content"] == "\n\n".join(kilobyte(i) for i in range(LONG // 2))


# ---- Claude Code transcripts


def transcript(blocks_per_line: list[list[Any]]) -> bytes:
    base = {"sessionId": "s", "isSidechain": False}
    lines: list[Any] = [
        {**base, "type": "user", "uuid": "u0", "message": {"role": "user", "content": "task"}}
    ]
    for n, blocks in enumerate(blocks_per_line):
        message = {"id": "msg_1", "role": "assistant", "content": blocks}
        lines.append({**base, "type": "assistant", "uuid": f"u{n + 1}", "message": message})
    return b"".join(json.dumps(v).encode() + b"\n" for v in lines)


def read_claude(data: bytes) -> Any:
    [t] = read_with(claude_code.READER, data, name="cc", filename="cc.jsonl")
    return t


def test_claude_code_joins_one_messages_blocks_as_before_and_skips_repeats() -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls", "n": 1}}
    again = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "Bash",
        "input": {"n": 1.0, "command": "ls"},
    }
    t = read_claude(
        transcript(
            [
                [{"type": "thinking", "thinking": ""}, {"type": "text", "text": "first"}],
                [{"type": "text", "text": "first"}, {"type": "text", "text": ""}],  # "first" again
                [{"type": "thinking", "thinking": "why"}, {"type": "thinking", "thinking": ""}],
                [{"type": "thinking", "thinking": "how"}, {"type": "text", "text": ""}],
                [{"type": "text", "text": "second"}, call],
                [again],  # equal to the call (1 == 1.0, any key order): a repeat too
            ]
        )
    )
    [turn] = t.turns
    # from the first non-empty text on, an empty one kept; a repeated block only once
    assert turn.text == "first\n\nsecond"
    assert turn.reasoning == "why\n\nhow"  # the empty thought was held before "why"
    assert [c.id for c in turn.tool_calls] == ["toolu_1"]


def test_claude_code_reads_one_message_of_many_lines_in_one_pass() -> None:
    lines = [
        [{"type": "text", "text": kilobyte(i)}, {"type": "text", "text": "same"}]
        for i in range(LONG)
    ]
    [turn] = read_claude(transcript(lines)).turns
    texts = turn.text.split("\n")
    assert len(texts) == LONG + 1 and texts[:3] == [kilobyte(0), "same", kilobyte(1)]


# ---- chat messages


def test_system_messages_before_the_task_join_with_newlines_empty_ones_too() -> None:
    messages = [
        {"role": "system", "content": "a"},
        {"role": "developer", "content": ""},
        {"role": "system", "content": [{"type": "text", "text": "b"}]},
        {"role": "user", "content": "task"},
        {"role": "system", "content": "after the task: not the system prompt"},
        {"role": "assistant", "content": "done"},
    ]
    assert load_bytes(orjson.dumps(messages), name="c", filename="c.json").system == "a\n\nb"
    bare = [{"role": "user", "content": "task"}, {"role": "assistant", "content": "done"}]
    assert load_bytes(orjson.dumps(bare), name="c", filename="c.json").system is None


def test_many_system_messages_are_read_in_one_pass() -> None:
    messages: list[Any] = [{"role": "system", "content": kilobyte(i)} for i in range(LONG)]
    messages += [{"role": "user", "content": "task"}, {"role": "assistant", "content": "done"}]
    t = load_bytes(orjson.dumps(messages), name="c", filename="c.json")
    assert t.system == "\n".join(kilobyte(i) for i in range(LONG))


# ---- Gemini contents


def function_call(name: str, ident: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": {}}
    if ident is not None:
        call["id"] = ident
    return {"functionCall": call}


def function_response(name: Any, ident: Any = None) -> dict[str, Any]:
    response: dict[str, Any] = {"name": name, "response": {"output": "ok"}}
    if ident is not None:
        response["id"] = ident
    return {"functionResponse": response}


def answered(contents: list[Any]) -> list[Any]:
    chat, _ = contents_to_chat(contents, "g")
    return [m["tool_call_id"] for m in chat if m["role"] == "tool"]


def test_a_function_response_answers_its_id_else_the_oldest_call_of_its_name() -> None:
    contents = [
        {
            "role": "model",
            "parts": [function_call("a", "i1"), function_call("a"), function_call("b", "i2")],
        },
        {
            "role": "user",
            "parts": [
                function_response("b", "i1"),  # its id wins over its name
                function_response("a", "made-up"),  # no call has it: the oldest "a" left
                function_response("b"),
                function_response("b"),  # none left: its name
                function_response("c", "x"),  # none of its name either: its own id
            ],
        },
    ]
    made = contents_to_chat(contents, "g")[0][0]["tool_calls"][1]["id"]
    assert answered(contents) == ["i1", made, "i2", "b", "x"]


def test_many_parallel_calls_answered_with_made_up_ids_are_matched_in_one_pass() -> None:
    calls = [function_call("bash") for _ in range(LONG // 2)]
    responses = [function_response("bash", f"made-up-{i}") for i in range(LONG // 2)]
    contents = [
        {"role": "user", "parts": [{"text": "task"}]},
        {"role": "model", "parts": calls},
        {"role": "user", "parts": responses},
    ]
    chat, _ = contents_to_chat(contents, "g")
    assert answered(contents) == [c["id"] for c in chat[1]["tool_calls"]]  # in order


# ---- recordings


def test_turns_no_step_answered_are_matched_in_one_pass() -> None:
    """Many steps, and a conversation whose turns none of them answered (all but the last)."""

    def call(ident: str) -> dict[str, Any]:
        return {"id": ident, "type": "function", "function": {"name": "bash", "arguments": "{}"}}

    def exchange(request: dict[str, Any], message: dict[str, Any]) -> bytes:
        line = {"type": "exchange", "lane": "main", "api": "chat", "status": 200, "error": None,
                "request": request, "message": message}  # fmt: skip
        return orjson.dumps(line) + b"\n"

    n = 5_000
    lines = [
        exchange(
            {"model": "m", "n": k, "messages": []},
            {"role": "assistant", "tool_calls": [call(f"s{k}")]},
        )
        for k in range(n)
    ]
    history: list[Any] = [{"role": "user", "content": "task"}]
    for j in range(n):
        history.append({"role": "assistant", "content": None, "tool_calls": [call(f"h{j}")]})
        history.append({"role": "tool", "tool_call_id": f"h{j}", "content": "ok"})
    lines.append(
        exchange({"model": "m", "messages": history}, {"role": "assistant", "content": "done"})
    )
    t = load_bytes(b"".join(lines), name="rec", filename="rec.jsonl")
    assert len(t.turns) == n + 1
    assert [turn.recorded.index for turn in t.turns if turn.recorded] == [n]
