"""Claude Code session transcripts, read from real transcripts (fixtures README)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from proxy.errors import LoadError
from proxy.formats import read_with
from proxy.formats.anthropic import messages_to_chat
from proxy.formats.harness_logs.claude_code import READER, convert
from proxy.replay.trajectory import Trajectory
from tests.conftest import ROOT

LOGS = ROOT / "tests/fixtures/logs"
HERE = LOGS / "claude-code"
TRANSCRIPTS = ("session.jsonl", "subagent.jsonl", "v1-session.jsonl", "e2e-replay.jsonl")


def raw(name: str) -> bytes:
    return (HERE / name).read_bytes()


def lines(path: str) -> list[tuple[int, Any]]:
    text = (LOGS / path).read_text().splitlines()
    return [(i, json.loads(line)) for i, line in enumerate(text) if line.strip()]


def read(data: bytes, name: str = "session") -> Trajectory:
    [t] = read_with(READER, data, name=name, source=f"{name}.jsonl")
    return t


def edited(name: str, change: Callable[[list[Any]], None]) -> bytes:
    """A real transcript with its lines (parsed) changed by `change`."""
    values = [json.loads(line) for line in raw(name).decode().splitlines()]
    change(values)
    return "".join(json.dumps(v) + "\n" for v in values).encode()


def calls(t: Trajectory) -> list[list[str]]:
    return [[c.id for c in turn.tool_calls] for turn in t.turns]


def test_two_exchanges_with_parallel_calls_reasoning_a_subagent_and_a_compaction() -> None:
    t = read(raw("session.jsonl"))
    assert t.format == "claude-code"
    assert t.task == "Set up the greeting files in this repository."
    assert t.system is None  # Claude Code builds it per request; the transcript has none
    assert calls(t) == [["toolu_cc_1", "toolu_cc_2"], ["toolu_cc_3"], ["toolu_cc_4"], [],
                        ["toolu_cc_5"], []]  # fmt: skip
    assert [turn.exchange for turn in t.turns] == [1, 1, 1, 1, 2, 2]
    assert [turn.index for turn in t.turns] == [5, 11, 13, 16, 21, 23]  # each response's 1st line
    first = t.turns[0]  # lines 5-8: thinking, text and two tool_use lines of one message.id
    assert first.reasoning == "I should see what is in the repository before changing it."
    assert first.text == "Let me look around first."
    assert (
        first.tool_calls[1].arguments
        == '{"command": "cat existing.txt", "description": "show the file"}'
    )
    assert t.turns[1].tool_calls[0].name == "Agent"
    assert t.turns[2].reasoning == "Now the greeting file." and t.turns[2].text == ""
    assert t.turns[3].final and t.turns[3].text == "Part one is done."
    assert [u.content for u in t.turns[4].follow_up] == ["Now write the answer to answer.txt."]
    assert t.tool_outputs["toolu_cc_2"] == "old value"
    assert t.tool_outputs["toolu_cc_4"].startswith("Exit code 1\n")  # is_error: its text
    notes = {n.index: n.reason for n in t.skipped}
    assert json.loads(raw("subagent.meta.json"))["toolUseId"] == "toolu_cc_3"
    agent = lines("claude-code/subagent.jsonl")[0][1]["agentId"]
    assert f"agent-{agent}.jsonl" in notes[12]  # on the line of the Agent call's result
    assert "compaction" in notes[29]  # the compact_boundary system line
    assert "summary of a compaction" in notes[30]  # isCompactSummary
    assert "isMeta" in notes[31]
    assert "<command-name>" in notes[32] and "<local-command-stdout>" in notes[33]
    assert notes[0] == (
        "lines that are not conversation: queue-operation x6, attachment x3, last-prompt x3, mode x2"
    )
    assert t.dropped == ()


def test_the_messages_are_what_claude_code_sent_the_model() -> None:
    """Its last request of exchange 2: the same messages, parallel calls and results grouped the
    same way; it adds system messages (attachments) and a reminder to the first user message."""
    sent, _ = messages_to_chat(json.loads(raw("session.sent.json")), "sent")
    sent = [m for m in sent if m["role"] != "system"]
    sent[0]["content"] = sent[0]["content"][-1]["text"]  # the task, after the reminder block
    [c] = convert(lines("claude-code/session.jsonl"), "session.jsonl")
    said = [{k: v for k, v in m.items() if k not in ("usage", "created")} for m in c.messages]
    assert said[: len(sent)] == sent
    assert said[len(sent)] == {"role": "assistant", "content": "All done."}  # its answer


def test_a_subagent_transcript_reads_as_a_conversation_of_its_own() -> None:
    t = read(raw("subagent.jsonl"), "subagent")
    spawned = read(raw("session.jsonl")).turns[1].tool_calls[0]
    assert spawned.name == "Agent" and t.task == json.loads(spawned.arguments)["prompt"]
    assert calls(t) == [["toolu_sub_1"], []]
    assert t.turns[0].reasoning == "A quick count will do."
    assert t.skipped[0].index == 0 and "subagent's own transcript" in t.skipped[0].reason


def test_inline_sidechain_lines_of_claude_code_1_are_left_out_and_reported() -> None:
    t = read(raw("v1-session.jsonl"), "v1")
    assert t.task == "Set up the greeting files in this repository."
    assert calls(t) == [["toolu_cc_1", "toolu_cc_2"], ["toolu_cc_3"], ["toolu_cc_4"], [],
                        ["toolu_cc_5"], []]  # fmt: skip
    assert "toolu_sub_1" not in t.tool_outputs  # the subagent's own call
    assert t.tool_outputs["toolu_cc_3"] == "existing.txt has 1 line."
    notes = {n.index: n.reason for n in t.skipped}
    assert "sidechain" in notes[8] and "5 lines" in notes[8]  # lines 8-12
    assert "Task tool" in notes[13]
    assert notes[18] == "lines that are not conversation: summary x2"


def test_the_transcript_of_a_replayed_e2e_run_gives_back_its_script() -> None:
    t = read(raw("e2e-replay.jsonl"), "e2e")
    assert calls(t) == [["call_rec_1"], ["call_rec_2"], ["call_rec_3"], []]
    assert [turn.text for turn in t.turns] == ["Step 1.", "Step 2.", "Step 3.", "All done."]


def test_miss_is_none_for_every_transcript() -> None:
    for name in TRANSCRIPTS:
        assert READER.miss(lines(f"claude-code/{name}")) is None, name


@pytest.mark.parametrize(
    ("items", "where"),
    [
        (lines("codex/rollout.jsonl"), 'lines 1-50 have no "type": "user" or "assistant"'),
        (lines("codex/v0.20-rollout.jsonl"), "lines 1-18 have no"),
        (
            [(0, {"role": "user", "content": "hi"}), (1, {"role": "assistant", "content": "yo"})],
            "lines 1-2 have no",
        ),  # chat JSONL
        ([(0, [{"role": "user", "content": "hi"}])], "line 1 is not an object"),  # a chat list
    ],
)
def test_miss_says_what_was_expected_and_where(items: list[tuple[int, Any]], where: str) -> None:
    miss = READER.miss(items)
    assert miss is not None and miss.closeness == 0
    assert "Claude Code transcript" in miss.reason and where in miss.reason


def test_a_line_that_is_not_json_is_a_load_error_with_its_index() -> None:
    text = raw("session.jsonl").decode().splitlines(keepends=True)
    text[9] = text[9][:40] + "\n"
    with pytest.raises(LoadError) as caught:
        read("".join(text).encode())
    assert caught.value.index == 9


def _drop_id(v: list[Any]) -> None:
    del v[7]["message"]["content"][0]["id"]


def _no_message(v: list[Any]) -> None:
    del v[20]["message"]


def _bad_content(v: list[Any]) -> None:
    v[22]["message"]["content"] = 7


@pytest.mark.parametrize(
    ("change", "index", "reason"),
    [
        (_drop_id, 7, "tool_use needs an id and a name"),
        (_no_message, 20, 'a "user" line without a "message" object'),
        (_bad_content, 22, "message.content must be a string or a list of blocks"),
    ],
)
def test_a_broken_line_is_a_load_error_with_its_index(
    change: Callable[[list[Any]], None], index: int, reason: str
) -> None:
    with pytest.raises(LoadError) as caught:
        read(edited("session.jsonl", change))
    assert caught.value.index == index and reason in caught.value.reason


def test_blocks_of_one_response_stay_one_message_however_they_were_written() -> None:
    def shuffle(v: list[Any]) -> None:
        v.insert(8, v.pop(9))  # the first call's result written before the second call's line
        v.insert(8, dict(v[7]))  # and a tool_use line written twice

    t = read(edited("session.jsonl", shuffle))
    assert calls(t)[0] == ["toolu_cc_1", "toolu_cc_2"]
    assert t.tool_outputs["toolu_cc_1"] == "existing.txt" and t.dropped == ()


def test_a_reply_claude_code_made_itself_is_not_a_turn() -> None:
    def api_error(v: list[Any]) -> None:
        v[16]["isApiErrorMessage"] = True
        v[16]["message"]["model"] = "<synthetic>"

    t = read(edited("session.jsonl", api_error))
    assert "Part one is done." not in [turn.text for turn in t.turns]
    assert any(n.index == 16 and "made itself" in n.reason for n in t.skipped)
