"""Codex CLI rollouts, read from real rollouts (fixtures README): what is Codex's own.
test_readers.py holds it, with every reader, to the contract."""

from __future__ import annotations

import json
from typing import Any

from proxy.apis.responses_history import items_to_chat
from proxy.formats.harness_logs.codex import READER, convert
from proxy.replay.trajectory import Trajectory
from tests.unit.formats.harness_logs import published
from tests.unit.formats.harness_logs.published import Change, calls, parsed, raw

ROLLOUT = "codex/rollout.jsonl"
OLD = "codex/v0.20-rollout.jsonl"
PATCH = "*** Begin Patch\n*** Add File: greeting.txt\n+hello\n*** End Patch\n"


def read(data: bytes, name: str = "rollout") -> Trajectory:
    return published.read(READER, data, name)


def edited(path: str, change: Change) -> bytes:
    """A real rollout with its lines (parsed) changed by `change`."""
    return published.edited(READER, path, change)


def test_two_exchanges_with_parallel_calls_reasoning_a_subagent_and_a_freeform_call() -> None:
    t = read(raw(ROLLOUT))
    assert t.system is not None and t.system.startswith(
        "You are a coding agent running in the Codex CLI"
    )
    assert t.task == "Set up the greeting files in this repository."  # not <environment_context>
    assert calls(t) == [["call_cx_1", "call_cx_2"], ["call_cx_3"], ["call_cx_4"], ["call_cx_5"],
                        [], ["call_cx_7"], []]  # fmt: skip
    assert [turn.round for turn in t.turns] == [1, 1, 1, 1, 1, 2, 2]
    assert [turn.index for turn in t.turns] == [10, 21, 27, 32, 39, 54, 60]
    first = t.turns[0]  # lines 10-14: reasoning, message, two function calls of one response
    assert first.reasoning == "I should see what is in the repository before changing it."
    assert first.text == "Let me look around first."
    assert first.tool_calls[0].arguments == '{"cmd": "ls"}'  # verbatim
    assert t.turns[1].tool_calls[0].name == "spawn_agent"
    # served with its namespace over the Responses API: Codex refuses spawn_agent without it
    assert t.turns[1].tool_calls[0].dispatch == {"responses": {"namespace": "multi_agent_v1"}}
    assert t.turns[2].tool_calls[0].arguments == json.dumps({"input": PATCH})
    assert [u.content for u in t.turns[5].follow_up] == ["Now write the answer to answer.txt."]
    assert t.tool_outputs["call_cx_4"] == "unsupported custom tool call: apply_patch"
    assert "cat: missing.txt: No such file or directory" in t.tool_outputs["call_cx_5"]
    notes = {n.index: n.reason for n in t.skipped}
    subagent = parsed(READER, "codex/subagent.jsonl")[0][1]["payload"]["id"]
    assert subagent in notes[24]  # on the spawn_agent call's output
    assert 21 not in notes  # nothing of the namespaced call is left out
    assert '{"input": ...}' in notes[27]
    assert notes[2].startswith("3 messages of Codex's own context")  # lines 2, 3 and 42
    assert "event_msg x27" in notes[1] and "token_usage_record x8" in notes[1]
    # Codex sent the subagent's notification itself after the final answer, and the model
    # answered it again: with the notification left out, that answer has no user message before
    [dropped] = t.dropped
    assert dropped.index == 44


def test_the_messages_are_what_codex_sent_the_model() -> None:
    """Its last request: the same items in the same groups, less its own context messages (and
    the freeform call, which the generic Responses reader does not read)."""
    items = json.loads(raw("codex/rollout.sent.json"))
    sent, _ = items_to_chat([i for i in items if i.get("call_id") != "call_cx_4"], "sent")
    own = ("<environment_context>", "<subagent_notification>")
    sent = [m for m in sent if m["role"] != "developer" and not _text(m).startswith(own)]
    for m in sent:
        if m["role"] == "user":
            m["content"] = _text(m)
    [c] = convert(parsed(READER, ROLLOUT), "rollout.jsonl")
    mine = [
        {k: v for k, v in m.items() if k != "usage"}  # what the response cost: not sent back
        for m in c.messages
        if "call_cx_4" not in json.dumps(m, default=str)
    ]
    assert mine[: len(sent)] == sent
    assert mine[len(sent)] == {"role": "assistant", "content": "All done."}  # its answer


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content or [])


def test_a_subagent_rollout_names_the_thread_that_spawned_it() -> None:
    t = read(raw("codex/subagent.jsonl"), "subagent")
    parent = parsed(READER, ROLLOUT)[0][1]["payload"]["id"]
    assert t.skipped[0].index == 0 and parent in t.skipped[0].reason


def test_a_rollout_of_codex_0_20_without_the_wrapper() -> None:
    t = read(raw(OLD), "old")
    assert t.task == "Set up the greeting files in this repository." and t.system is None
    # Codex 0.20 wrote each parallel call's output right after it; the state lines end a response
    assert calls(t) == [["call_old_1", "call_old_2"], ["call_old_3"], []]
    assert t.turns[0].reasoning == "I should see what is in the repository before changing it."
    assert (
        t.tool_outputs["call_old_2"]
        == '{"output":"old value\\n","metadata":{"exit_code":0,"duration_seconds":0.0}}'
    )
    assert [(n.index, n.reason) for n in t.skipped] == [
        (1, "lines that are not conversation: state x7")
    ]


def test_without_response_ends_a_tool_output_ends_a_response() -> None:
    def unmarked(v: list[Any]) -> None:
        v[:] = [line for line in v if line.get("record_type") != "state"]

    t = read(edited(OLD, unmarked), "old")
    assert calls(t) == [["call_old_1"], ["call_old_2"], ["call_old_3"], []]


def test_a_local_shell_call_is_a_shell_call_and_a_web_search_is_left_out() -> None:
    def local(v: list[Any]) -> None:
        command = ["bash", "-lc", "echo $((6 * 7)) > answer.txt"]
        v[13] = {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_old_3",
                 "status": "completed", "action": {"type": "exec", "command": command,
                 "timeout_ms": 1000, "working_directory": None, "env": None, "user": None}}  # fmt: skip
        v.insert(13, {"type": "web_search_call", "id": "ws_1", "status": "completed",
                      "action": {"type": "search", "query": "greeting"}})  # fmt: skip

    t = read(edited(OLD, local), "old")
    [call] = t.turns[1].tool_calls
    assert (call.id, call.name) == ("call_old_3", "shell")
    assert json.loads(call.arguments) == {
        "command": ["bash", "-lc", "echo $((6 * 7)) > answer.txt"],
        "timeout_ms": 1000,
    }
    assert any(n.index == 13 and "web search" in n.reason for n in t.skipped)
