"""Codex CLI rollouts, read from real rollouts (fixtures README)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from proxy.errors import LoadError
from proxy.formats import read_with
from proxy.formats.harness_logs.codex import READER, convert
from proxy.formats.responses import items_to_chat
from proxy.replay.trajectory import Trajectory
from tests.conftest import ROOT

LOGS = ROOT / "tests/fixtures/logs"
HERE = LOGS / "codex"
ROLLOUTS = ("rollout.jsonl", "subagent.jsonl", "v0.20-rollout.jsonl", "e2e-replay.jsonl")
PATCH = "*** Begin Patch\n*** Add File: greeting.txt\n+hello\n*** End Patch\n"


def raw(name: str) -> bytes:
    return (HERE / name).read_bytes()


def lines(path: str) -> list[tuple[int, Any]]:
    text = (LOGS / path).read_text().splitlines()
    return [(i, json.loads(line)) for i, line in enumerate(text) if line.strip()]


def read(data: bytes, name: str = "rollout") -> Trajectory:
    [t] = read_with(READER, data, name=name, source=f"{name}.jsonl")
    return t


def edited(name: str, change: Callable[[list[Any]], None]) -> bytes:
    """A real rollout with its lines (parsed) changed by `change`."""
    values = [json.loads(line) for line in raw(name).decode().splitlines()]
    change(values)
    return "".join(json.dumps(v) + "\n" for v in values).encode()


def calls(t: Trajectory) -> list[list[str]]:
    return [[c.id for c in turn.tool_calls] for turn in t.turns]


def test_two_exchanges_with_parallel_calls_reasoning_a_subagent_and_a_freeform_call() -> None:
    t = read(raw("rollout.jsonl"))
    assert t.format == "codex"
    assert t.system is not None and t.system.startswith(
        "You are a coding agent running in the Codex CLI"
    )
    assert t.task == "Set up the greeting files in this repository."  # not <environment_context>
    assert calls(t) == [["call_cx_1", "call_cx_2"], ["call_cx_3"], ["call_cx_4"], ["call_cx_5"],
                        [], ["call_cx_7"], []]  # fmt: skip
    assert [turn.exchange for turn in t.turns] == [1, 1, 1, 1, 1, 2, 2]
    assert [turn.index for turn in t.turns] == [10, 21, 27, 32, 39, 54, 60]
    first = t.turns[0]  # lines 10-14: reasoning, message, two function calls of one response
    assert first.reasoning == "I should see what is in the repository before changing it."
    assert first.text == "Let me look around first."
    assert first.tool_calls[0].arguments == '{"cmd": "ls"}'  # verbatim
    assert t.turns[1].tool_calls[0].name == "spawn_agent"
    assert t.turns[2].tool_calls[0].arguments == json.dumps({"input": PATCH})
    assert [u.content for u in t.turns[5].follow_up] == ["Now write the answer to answer.txt."]
    assert t.tool_outputs["call_cx_4"] == "unsupported custom tool call: apply_patch"
    assert "cat: missing.txt: No such file or directory" in t.tool_outputs["call_cx_5"]
    notes = {n.index: n.reason for n in t.skipped}
    subagent = lines("codex/subagent.jsonl")[0][1]["payload"]["id"]
    assert subagent in notes[24]  # on the spawn_agent call's output
    assert "namespace multi_agent_v1" in notes[21]
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
    items = [i for i in json.loads(raw("rollout.sent.json")) if i.get("call_id") != "call_cx_4"]
    sent, _ = items_to_chat(items, "sent")
    own = ("<environment_context>", "<subagent_notification>")
    sent = [m for m in sent if m["role"] != "developer" and not _text(m).startswith(own)]
    for m in sent:
        if m["role"] == "user":
            m["content"] = _text(m)
    [c] = convert(lines("codex/rollout.jsonl"), "rollout.jsonl")
    mine = [
        {k: v for k, v in m.items() if k != "usage"}  # what the response cost: not sent back
        for m in c.messages
        if "call_cx_4" not in json.dumps(m)
    ]
    assert mine[: len(sent)] == sent
    assert mine[len(sent)] == {"role": "assistant", "content": "All done."}  # its answer


def _text(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content or [])


def test_a_subagent_rollout_reads_as_a_conversation_of_its_own() -> None:
    t = read(raw("subagent.jsonl"), "subagent")
    spawned = read(raw("rollout.jsonl")).turns[1].tool_calls[0]
    assert t.task == json.loads(spawned.arguments)["message"]
    assert calls(t) == [["call_sub_1"], []]
    assert t.turns[0].reasoning == "A quick count will do."
    parent = lines("codex/rollout.jsonl")[0][1]["payload"]["id"]
    assert t.skipped[0].index == 0 and parent in t.skipped[0].reason


def test_a_rollout_of_codex_0_20_without_the_wrapper() -> None:
    t = read(raw("v0.20-rollout.jsonl"), "old")
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

    t = read(edited("v0.20-rollout.jsonl", unmarked), "old")
    assert calls(t) == [["call_old_1"], ["call_old_2"], ["call_old_3"], []]


def test_the_rollout_of_a_replayed_e2e_run_gives_back_its_script() -> None:
    t = read(raw("e2e-replay.jsonl"), "e2e")
    assert calls(t) == [["call_rec_1"], ["call_rec_2"], ["call_rec_3"], []]
    assert [turn.text for turn in t.turns] == ["Step 1.", "Step 2.", "Step 3.", "All done."]


def test_miss_is_none_for_every_rollout() -> None:
    for name in ROLLOUTS:
        assert READER.miss(lines(f"codex/{name}")) is None, name


@pytest.mark.parametrize(
    ("items", "where"),
    [
        (lines("claude-code/session.jsonl"), 'line 1 has no "type": "session_meta"'),
        (lines("claude-code/v1-session.jsonl"), 'line 1 has no "type": "session_meta"'),
        (
            [(0, {"role": "user", "content": "hi"}), (1, {"role": "assistant", "content": "yo"})],
            'line 1 has no "type": "session_meta"',
        ),  # chat JSONL
        ([(0, [{"role": "user", "content": "hi"}])], "line 1 is not an object"),  # a chat list
    ],
)
def test_miss_says_what_was_expected_and_where(items: list[tuple[int, Any]], where: str) -> None:
    miss = READER.miss(items)
    assert miss is not None and miss.closeness == 0
    assert "Codex rollout" in miss.reason and where in miss.reason


def test_miss_is_close_for_a_rollout_that_lost_its_first_line() -> None:
    miss = READER.miss(lines("codex/rollout.jsonl")[1:])
    assert miss is not None and miss.closeness == 2 and "line 2" in miss.reason


def test_a_line_that_is_not_json_is_a_load_error_with_its_index() -> None:
    text = raw("rollout.jsonl").decode().splitlines(keepends=True)
    text[13] = text[13][:50] + "\n"
    with pytest.raises(LoadError) as caught:
        read("".join(text).encode())
    assert caught.value.index == 13


def _no_call_id(v: list[Any]) -> None:
    del v[13]["payload"]["call_id"]


def _no_payload(v: list[Any]) -> None:
    v[18]["payload"] = "output"


def _no_role(v: list[Any]) -> None:
    del v[7]["payload"]["role"]


def _no_output_id(v: list[Any]) -> None:
    del v[29]["payload"]["call_id"]


@pytest.mark.parametrize(
    ("change", "index", "reason"),
    [
        (_no_call_id, 13, "a function_call item needs a call_id and a name"),
        (_no_payload, 18, 'a response_item without a "type"'),
        (_no_role, 7, "a message item without a role"),
        (_no_output_id, 29, "a custom_tool_call_output item without a call_id"),
    ],
)
def test_a_broken_line_is_a_load_error_with_its_index(
    change: Callable[[list[Any]], None], index: int, reason: str
) -> None:
    with pytest.raises(LoadError) as caught:
        read(edited("rollout.jsonl", change))
    assert caught.value.index == index and reason in caught.value.reason


def test_a_local_shell_call_is_a_shell_call_and_a_web_search_is_left_out() -> None:
    def local(v: list[Any]) -> None:
        command = ["bash", "-lc", "echo $((6 * 7)) > answer.txt"]
        v[13] = {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_old_3",
                 "status": "completed", "action": {"type": "exec", "command": command,
                 "timeout_ms": 1000, "working_directory": None, "env": None, "user": None}}  # fmt: skip
        v.insert(13, {"type": "web_search_call", "id": "ws_1", "status": "completed",
                      "action": {"type": "search", "query": "greeting"}})  # fmt: skip

    t = read(edited("v0.20-rollout.jsonl", local), "old")
    [call] = t.turns[1].tool_calls
    assert (call.id, call.name) == ("call_old_3", "shell")
    assert json.loads(call.arguments) == {
        "command": ["bash", "-lc", "echo $((6 * 7)) > answer.txt"],
        "timeout_ms": 1000,
    }
    assert any(n.index == 13 and "web search" in n.reason for n in t.skipped)
