"""Gemini contents as a trajectory, and the Gemini API read and written, step by step."""

from __future__ import annotations

import json
from typing import Any

import orjson

from proxy.apis.gemini import parse_gemini, read_answer, response_events, response_object, target
from proxy.apis.gemini_history import contents_to_chat
from proxy.formats import load_bytes
from proxy.replay.conversation import NO_ID
from proxy.replay.engine import Scripted, decide

CONTENTS = [
    {"role": "user", "parts": [{"text": "<session_context>cwd</session_context>"}, {"text": "List."}]},
    {"role": "model", "parts": [
        {"text": "look first", "thought": True},
        {"text": "Listing."},
        {"functionCall": {"name": "run_shell_command", "args": {"command": "ls"}}},
        {"functionCall": {"id": "c2", "name": "run_shell_command", "args": {"command": "pwd"}}},
    ]},
    {"role": "user", "parts": [
        {"functionResponse": {"id": "c2", "name": "run_shell_command", "response": {"output": "/w"}}},
        {"functionResponse": {"name": "run_shell_command", "response": {"output": "a b"}}},
    ]},
    {"role": "model", "parts": [{"text": "Done."}]},
]  # fmt: skip
DOC = {"systemInstruction": {"parts": [{"text": "Be brief."}]}, "contents": CONTENTS}


def test_contents_become_chat_messages_with_ids_paired() -> None:
    chat, indexes = contents_to_chat(CONTENTS, "t", system=DOC["systemInstruction"])
    assert indexes == [-1, 0, 1, 2, 2, 3]
    assert chat[1] == {"role": "user", "content": "<session_context>cwd</session_context>\nList."}
    model = chat[2]
    assert model["content"] == "Listing." and model["reasoning_content"] == "look first"
    first, second = model["tool_calls"]
    assert first["id"].startswith("gemini_") and second["id"] == "c2"  # an id-less call: its place
    assert json.loads(first["function"]["arguments"]) == {"command": "ls"}
    # the response with an id answers its call; the id-less one the oldest of its name left
    assert [(m["tool_call_id"], m["content"]) for m in chat[3:5]] == [
        ("c2", "/w"),
        (first["id"], "a b"),
    ]


def test_a_contents_document_is_a_trajectory() -> None:
    t = load_bytes(orjson.dumps(DOC), name="g", filename="g.json")
    assert t.format == "gemini" and t.system == "Be brief." and len(t.turns) == 2
    assert [c.name for c in t.turns[0].tool_calls] == ["run_shell_command"] * 2
    assert t.turns[0].reasoning == "look first" and t.turns[1].final


def test_the_request_is_read_and_an_id_less_history_still_holds_its_turns() -> None:
    body = {**DOC, "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}]}
    conv = parse_gemini(body)
    target(conv, "/v1beta/models/gemini-2.5-pro:streamGenerateContent", "alt=sse")
    assert (conv.model, conv.stream, conv.array) == ("gemini-2.5-pro", True, False)
    assert conv.tools == ("run_shell_command",) and conv.system == "Be brief."
    assert [c.id for c in conv.replies[0].calls] == [f"{NO_ID}1.2", "c2"]
    assert {r.call_id for r in conv.results} == {"c2", f"{NO_ID}1.2"}
    script = load_bytes(orjson.dumps(DOC), name="g", filename="g.json")
    # the script's first call has a stand-in id of its own: the history's id-less call is
    # matched by name, and the request (without the final answer) is due turn 2
    conv = parse_gemini({**body, "contents": CONTENTS[:3]})
    decision = decide(conv, script)
    assert isinstance(decision, Scripted) and decision.turn.number == 2
    assert set(decision.observations.returned) == {c.id for c in script.turns[0].tool_calls}


def test_a_turn_is_written_as_candidates_and_read_back() -> None:
    script = load_bytes(orjson.dumps(DOC), name="g", filename="g.json")
    conv = parse_gemini({"contents": CONTENTS[:1]})
    turn = script.turns[0]
    thoughts = {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}}
    events = response_events(turn, conv, thoughts, "k1")
    chunks = [orjson.loads(e.removeprefix(b"data: ")) for e in events]
    assert all(e.endswith(b"\r\n\r\n") and b"event:" not in e for e in events)
    parts = [c["candidates"][0]["content"]["parts"][0] for c in chunks]
    assert parts[0] == {"text": "look first", "thought": True} and parts[1] == {"text": "Listing."}
    assert parts[2]["functionCall"]["args"] == {"command": "ls"}
    assert [c["candidates"][0].get("finishReason") for c in chunks] == [None, None, None, "STOP"]
    assert "usageMetadata" in chunks[-1] and "usageMetadata" not in chunks[0]
    whole = orjson.loads(response_object(turn, conv, {}, "k1"))  # no thoughts asked for
    assert [list(p) for p in whole["candidates"][0]["content"]["parts"]] == [
        ["text"], ["functionCall"], ["functionCall"],
    ]  # fmt: skip
    conv.array = True  # streamGenerateContent without alt=sse: the chunks as one JSON array
    assert len(orjson.loads(response_object(turn, conv, {}, "k1"))) == 3
    back = read_answer(b"".join(events), stream=True)
    assert back.finish_reason == "STOP" and back.message is not None
    assert back.message["content"] == "Listing." and len(back.message["tool_calls"]) == 2


def test_a_text_streamed_in_pieces_is_read_back_whole() -> None:
    """Gemini streams a text a few words per chunk; the SDKs join the pieces as they are, so a
    recording of the stream holds the text once, not one line per chunk."""
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "look ", "thought": True}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "first", "thought": True}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Let "}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "me look."}, {"functionCall": {"name": "sh", "args": {}}}]}, "finishReason": "STOP"}]},
    ]  # fmt: skip
    raw = b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)
    back = read_answer(raw, stream=True)
    assert back.message is not None and back.message["content"] == "Let me look."
    assert back.native is not None
    assert [p.get("text") for p in back.native["candidates"][0]["content"]["parts"]] == [
        "look first",
        "Let me look.",
        None,
    ]
    # one JSON answer's separate parts stay separate
    whole = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "a"}, {"text": "b"}]}}]
    }
    assert read_answer(orjson.dumps(whole), stream=False).native["candidates"][0]["content"][  # type: ignore[index]
        "parts"
    ] == [{"text": "a"}, {"text": "b"}]


def test_an_id_less_history_gets_the_trailing_user_message_after_its_responses() -> None:
    """Live after the script: the recorded user message goes after the function responses, never
    between a functionCall and its functionResponse (Gemini refuses that order)."""
    recorded = [
        {"role": "user", "content": "List."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a"},
        {"role": "user", "content": "Now summarise."},
    ]  # fmt: skip
    script = load_bytes(orjson.dumps(recorded), name="s", filename="s.json")
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "List."}]},
            {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"output": "a"}}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "ls"}]}],
    }  # fmt: skip
    decision = decide(parse_gemini(body), script)
    assert not isinstance(decision, Scripted)
    [insertion] = decision.splice  # type: ignore[union-attr]
    assert insertion.position == 3  # after the responses, at the end


def test_a_recording_of_an_upstream_that_sends_no_ids_keeps_its_steps() -> None:
    """Real Gemini answers functionCalls without ids; the client then makes up ids of its own."""
    from proxy.formats import load_bytes as load

    def exchange(contents: list[Any], parts: list[Any]) -> bytes:
        line = {
            "type": "exchange", "lane": "main", "api": "gemini", "status": 200, "error": None,
            "method": "POST", "path": "/v1beta/models/m:generateContent",
            "request": {"contents": contents, "tools": [{"functionDeclarations": [{"name": "sh"}]}]},
            "response": {"candidates": [{"content": {"role": "model", "parts": parts}}]},
            "message": read_answer(orjson.dumps({"candidates": [{"content": {"role": "model", "parts": parts}}]}), stream=False).message,
        }  # fmt: skip
        return orjson.dumps(line) + b"\n"

    task = {"role": "user", "parts": [{"text": "Go."}]}
    call = {"functionCall": {"name": "sh", "args": {"command": "ls"}}}
    echoed = {
        "role": "model",
        "parts": [{"functionCall": {"id": "sh-123-abc", "name": "sh", "args": {"command": "ls"}}}],
    }
    result = {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": "sh-123-abc", "name": "sh", "response": {"output": "a"}}}
        ],
    }
    t = load(
        exchange([task], [call]) + exchange([task, echoed, result], [{"text": "Done."}]),
        name="r",
        filename="r.jsonl",
    )  # fmt: skip
    assert [turn.recorded is not None for turn in t.turns] == [True, True]
    assert [c.id for c in t.turns[0].tool_calls] == ["sh-123-abc"]  # the ids the client used
    assert t.tool_outputs == {"sh-123-abc": "a"}
