"""Claude Code session transcripts, read from real transcripts (fixtures README): what is Claude
Code's own. test_readers.py holds it, with every reader, to the contract."""

from __future__ import annotations

import json
from typing import Any

from proxy.apis.anthropic_history import messages_to_chat
from proxy.formats.harness_logs.claude_code import READER, convert
from proxy.replay.trajectory import Trajectory
from tests.unit.formats.harness_logs import published
from tests.unit.formats.harness_logs.published import Change, calls, parsed, raw

SESSION = "claude-code/session.jsonl"


def read(data: bytes, name: str = "session") -> Trajectory:
    return published.read(READER, data, name)


def edited(change: Change) -> bytes:
    """The real session with its lines (parsed) changed by `change`."""
    return published.edited(READER, SESSION, change)


def test_two_exchanges_with_parallel_calls_reasoning_a_subagent_and_a_compaction() -> None:
    t = read(raw(SESSION))
    assert t.task == "Set up the greeting files in this repository."
    assert t.system is None  # Claude Code builds it per request; the transcript has none
    assert calls(t) == [["toolu_cc_1", "toolu_cc_2"], ["toolu_cc_3"], ["toolu_cc_4"], [],
                        ["toolu_cc_5"], []]  # fmt: skip
    assert [turn.round for turn in t.turns] == [1, 1, 1, 1, 2, 2]
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
    assert json.loads(raw("claude-code/subagent.meta.json"))["toolUseId"] == "toolu_cc_3"
    agent = parsed(READER, "claude-code/subagent.jsonl")[0][1]["agentId"]
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
    sent, _ = messages_to_chat(json.loads(raw("claude-code/session.sent.json")), "sent")
    sent = [m for m in sent if m["role"] != "system"]
    sent[0]["content"] = sent[0]["content"][-1]["text"]  # the task, after the reminder block
    [c] = convert(parsed(READER, SESSION), "session.jsonl")
    said = [{k: v for k, v in m.items() if k not in ("usage", "created")} for m in c.messages]
    assert said[: len(sent)] == sent
    assert said[len(sent)] == {"role": "assistant", "content": "All done."}  # its answer


def test_a_subagent_transcript_says_it_is_one() -> None:
    t = read(raw("claude-code/subagent.jsonl"), "subagent")
    assert t.skipped[0].index == 0 and "subagent's own transcript" in t.skipped[0].reason


def test_inline_sidechain_lines_of_claude_code_1_are_left_out_and_reported() -> None:
    t = read(raw("claude-code/v1-session.jsonl"), "v1")
    assert t.task == "Set up the greeting files in this repository."
    assert calls(t) == [["toolu_cc_1", "toolu_cc_2"], ["toolu_cc_3"], ["toolu_cc_4"], [],
                        ["toolu_cc_5"], []]  # fmt: skip
    assert "toolu_sub_1" not in t.tool_outputs  # the subagent's own call
    assert t.tool_outputs["toolu_cc_3"] == "existing.txt has 1 line."
    notes = {n.index: n.reason for n in t.skipped}
    assert "sidechain" in notes[8] and "5 lines" in notes[8]  # lines 8-12
    assert "Task tool" in notes[13]
    assert notes[18] == "lines that are not conversation: summary x2"


def test_blocks_of_one_response_stay_one_message_however_they_were_written() -> None:
    def shuffle(v: list[Any]) -> None:
        v.insert(8, v.pop(9))  # the first call's result written before the second call's line
        v.insert(8, dict(v[7]))  # and a tool_use line written twice

    t = read(edited(shuffle))
    assert calls(t)[0] == ["toolu_cc_1", "toolu_cc_2"]
    assert t.tool_outputs["toolu_cc_1"] == "existing.txt" and t.dropped == ()


def test_a_reply_claude_code_made_itself_is_not_a_turn() -> None:
    def api_error(v: list[Any]) -> None:
        v[16]["isApiErrorMessage"] = True
        v[16]["message"]["model"] = "<synthetic>"

    t = read(edited(api_error))
    assert "Part one is done." not in [turn.text for turn in t.turns]
    assert any(n.index == 16 and "made itself" in n.reason for n in t.skipped)
