"""Every harness-log reader held to the contract of proxy/formats/harness_logs/reader.py, over its
real published files (tests/fixtures/harness_logs): each file is of its reader's format and reads as it;
a file of another shape is told why not, where, and how close it came; a file broken anywhere is a
LoadError with its line or item index; a run replayed by the proxy reads back as its script; a
subagent's own log reads as a conversation of its own. What only one reader does is tested in that
reader's own module."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from proxy.errors import LoadError
from proxy.formats import load_all
from proxy.formats.harness_logs import (
    Reader,
    claude_code,
    codex,
    mini_swe_agent,
    nemo_gym,
    opencode,
    openhands,
    swe_agent,
)
from proxy.formats.loading import READERS
from proxy.replay.content import text_of
from tests.unit.formats.harness_logs.published import (
    LOGS,
    PUBLISHED,
    Change,
    calls,
    drop,
    edited,
    parsed,
    put,
    raw,
    read,
    read_all,
)

# what each reader's `miss` calls its format
WHAT = {
    claude_code.READER: "Claude Code transcript",
    codex.READER: "Codex rollout",
    opencode.READER: "opencode session export",
    openhands.READER: "OpenHands events",
    swe_agent.READER: "SWE-agent trajectory",
    mini_swe_agent.READER: "mini-swe-agent trajectory",
    nemo_gym.READER: "NeMo-Gym rollouts",
}


def test_every_reader_the_loader_tries_is_tested_here_on_its_published_files() -> None:
    tried = {reader for reader in READERS if reader is not nemo_gym.SINGLE}  # test_nemo_gym.py
    assert tried == set(WHAT) == {reader for reader, _ in PUBLISHED}


# -- every published file is of its reader's format --------------------------------------------


@pytest.mark.parametrize(("reader", "path"), PUBLISHED, ids=[path for _, path in PUBLISHED])
def test_every_published_file_is_of_its_readers_format(reader: Reader, path: str) -> None:
    assert reader.miss(parsed(reader, path)) is None


@pytest.mark.parametrize(("reader", "path"), PUBLISHED, ids=[path for _, path in PUBLISHED])
def test_every_published_file_reads_as_its_format_alone_and_among_all(
    reader: Reader, path: str
) -> None:
    assert {t.format for t in read_all(reader, raw(path))} == {reader.name}
    assert {t.format for t in load_all(LOGS / path)} == {reader.name}  # told by its shape


# -- a file of another shape: why not, where, and how close ------------------------------------


@dataclass(frozen=True)
class File:
    """A published file, as the reader under test takes it, from its item `start` on."""

    path: str
    start: int = 0


CHAT = [{"role": "user", "content": "hi"}]
CHAT_LINES = [(0, {"role": "user", "content": "hi"}), (1, {"role": "assistant", "content": "yo"})]
NEMO_SECOND = (1, {"role": "assistant", "content": "hello"})

MISSES: list[tuple[Reader, Any, str, int]] = [
    # (reader, file, what its reason says of where, closeness)
    (claude_code.READER, File("codex/rollout.jsonl"),
     'lines 1-50 have no "type": "user" or "assistant"', 0),
    (claude_code.READER, File("codex/v0.20-rollout.jsonl"), "lines 1-18 have no", 0),
    (claude_code.READER, CHAT_LINES, "lines 1-2 have no", 0),  # chat JSONL
    (claude_code.READER, [(0, CHAT)], "line 1 is not an object", 0),  # a chat list
    (codex.READER, File("claude-code/session.jsonl"), 'line 1 has no "type": "session_meta"', 0),
    (codex.READER, File("claude-code/v1-session.jsonl"), 'line 1 has no "type": "session_meta"', 0),
    (codex.READER, CHAT_LINES, 'line 1 has no "type": "session_meta"', 0),
    (codex.READER, [(0, CHAT)], "line 1 is not an object", 0),
    (codex.READER, File("codex/rollout.jsonl", start=1), "line 2", 2),  # lost its first line
    (opencode.READER, CHAT, "not an object", 0),
    (opencode.READER, {"messages": CHAT}, "$.info", 1),
    (opencode.READER, {"info": {"id": "ses_1"}, "messages": CHAT}, "$.messages[0]", 2),
    (opencode.READER, File("openhands/v0-basic_interactions.json"), "not an object", 0),
    (opencode.READER, File("openhands/sdk-conversation"), "not an object", 0),
    (openhands.READER, CHAT, '$[0] has no "kind"', 0),
    (openhands.READER, {"info": {}, "messages": []}, "not a list", 0),
    (openhands.READER, [], "$[0] is not an object", 0),
    (openhands.READER, [{"kind": "Something"}], "$[0].kind 'Something'", 1),
    (openhands.READER, File("opencode/session.json"), "not a list", 0),
    (swe_agent.READER, CHAT, "not an object", 0),
    (swe_agent.READER, {"messages": CHAT}, "$.history is missing", 0),
    (swe_agent.READER, File("mini-swe-agent/toolcall.traj.json"), "$.history is missing", 0),
    (swe_agent.READER, File("opencode/session.json"), "$.history is missing", 0),
    (swe_agent.READER, {"trajectory": [], "environment": "main"}, "$.history is missing", 2),
    (swe_agent.READER, {"history": CHAT}, "$.history[0] has no", 1),
    (mini_swe_agent.READER, CHAT, "not an object", 0),
    (mini_swe_agent.READER, {"messages": CHAT}, "$.trajectory_format is missing", 0),  # generic
    (mini_swe_agent.READER, {"trajectory_format": "other-1", "messages": CHAT}, "'other-1'", 1),
    (mini_swe_agent.READER, {"trajectory_format": "mini-swe-agent-1.1", "info": {}},
     "$.messages is missing", 1),
    (mini_swe_agent.READER, File("swe-agent/function-calling.traj"), "$.messages is missing", 0),
    (nemo_gym.READER, [(0, {"role": "user", "content": "hi"}), NEMO_SECOND],
     'line 1 has no "responses_create_params"', 0),
    (nemo_gym.READER, [(0, ["role", "user"]), NEMO_SECOND],
     'line 2 has no "responses_create_params"', 0),  # the first object
    (nemo_gym.READER, [(0, {"responses_create_params": {"tools": []}, "_ng_task_index": 0}),
                       NEMO_SECOND], '"responses_create_params" has no "input"', 1),
]  # fmt: skip


def _shown(given: Any) -> str:
    if isinstance(given, File):
        return f"{given.path} from item {given.start + 1}" if given.start else given.path
    return json.dumps(given, separators=(",", ":"))


@pytest.mark.parametrize(
    ("reader", "given", "where", "closeness"),
    MISSES,
    ids=[f"{reader.name} on {_shown(given)}" for reader, given, _, _ in MISSES],
)
def test_miss_says_what_was_expected_where_and_how_close(
    reader: Reader, given: Any, where: str, closeness: int
) -> None:
    if isinstance(given, File):
        whole = parsed(reader, given.path)
        given = whole[given.start :] if given.start else whole
    miss = reader.miss(given)
    assert miss is not None and WHAT[reader] in miss.reason and where in miss.reason
    assert miss.closeness == closeness


# -- a broken file is a LoadError with the index of what broke it -------------------------------


@pytest.mark.parametrize(
    ("reader", "path", "line", "kept"),
    [
        (claude_code.READER, "claude-code/session.jsonl", 9, 40),
        (codex.READER, "codex/rollout.jsonl", 13, 50),
        (nemo_gym.READER, "nemo-gym/xlam_fc.jsonl", 2, 50),
    ],
    ids=["claude-code", "codex", "nemo-gym"],
)
def test_a_line_that_is_not_json_is_a_load_error_with_its_index(
    reader: Reader, path: str, line: int, kept: int
) -> None:
    text = raw(path).decode().splitlines(keepends=True)
    text[line] = text[line][:kept] + "\n"  # cut off, and more lines after it
    with pytest.raises(LoadError) as caught:
        read_all(reader, "".join(text).encode())
    assert caught.value.index == line


SESSION = "opencode/session.json"
SDK = "openhands/sdk-conversation"
V0 = "openhands/v0-basic_gui_mode.json"
SWE = "swe-agent/function-calling.traj"
MINI = "mini-swe-agent/toolcall.traj.json"
MINI_RESPONSES = "mini-swe-agent/responses.traj.json"

BROKEN: list[tuple[Reader, str, Change, int, str]] = [
    # (reader, file, the change that breaks it, the index of the error, what its reason says)
    (claude_code.READER, "claude-code/session.jsonl", drop((7, "message", "content", 0, "id")), 7,
     "tool_use needs an id and a name"),
    (claude_code.READER, "claude-code/session.jsonl", drop((20, "message")), 20,
     'a "user" line without a "message" object'),
    (claude_code.READER, "claude-code/session.jsonl", put((22, "message", "content"), 7), 22,
     "message.content must be a string or a list of blocks"),
    (codex.READER, "codex/rollout.jsonl", drop((13, "payload", "call_id")), 13,
     "a function_call item needs a call_id and a name"),
    (codex.READER, "codex/rollout.jsonl", put((18, "payload"), "output"), 18,
     'a response_item without a "type"'),
    (codex.READER, "codex/rollout.jsonl", drop((7, "payload", "role")), 7,
     "a message item without a role"),
    (codex.READER, "codex/rollout.jsonl", drop((29, "payload", "call_id")), 29,
     "a custom_tool_call_output item without a call_id"),
    (opencode.READER, SESSION, put(("messages", 3, "parts", 1, "callID"), None), 3,
     "parts[1].callID must be a string"),
    (opencode.READER, SESSION, put(("messages", 3, "parts", 1, "state", "input"), "oops"), 3,
     "parts[1].state.input must be an object"),
    (opencode.READER, SESSION, put(("messages", 2, "parts"), {}), 2, "parts must be a list"),
    (opencode.READER, SESSION, put(("messages", 5, "info", "role"), "system"), 5,
     "info.role must be user or assistant"),
    (opencode.READER, SESSION, put(("messages", 6), "text"), 6,  # an item that is not a message
     'message has no "info" object'),
    (openhands.READER, SDK, put((3, "tool_call"), None), 3, "tool_call must be an object"),
    (openhands.READER, SDK, put((5, "tool_call_id"), 7), 5, "tool_call_id must be a string"),
    (openhands.READER, SDK, put((1, "llm_message"), {"role": "tool"}), 1, "llm_message.role"),
    (openhands.READER, SDK, put((4, "kind"), None), 4, 'event has no "kind"'),
    (openhands.READER, V0, put((9, "tool_call_metadata"), {"tool_call_id": "x"}), 9,
     "model_response"),
    (openhands.READER, V0, put((10, "tool_call_metadata"), {"tool_call_id": None}), 10,
     "tool_call_id must be a string"),
    (openhands.READER, V0, drop((12, "observation")), 12,  # it has no "action" either
     'neither "action" nor "observation"'),
    (swe_agent.READER, SWE, drop(("history", 3, "tool_call_ids")), 3,
     "tool message has no tool_call_ids"),
    (swe_agent.READER, SWE, drop(("history", 2, "tool_calls", 0, "function")), 2,
     "tool_calls[0] has no function object"),
    (swe_agent.READER, SWE, put(("history", 2, "tool_calls"), "find_file"), 2,
     "tool_calls must be a list"),
    (swe_agent.READER, SWE, drop(("history", 5, "role")), 5, "history item has no role"),
    (swe_agent.READER, SWE, put(("history", 4, "tool_calls", 0, "function", "arguments"), "{oops"),
     4, "arguments is not valid JSON"),
    (mini_swe_agent.READER, MINI, put(("messages", 3), "text"), 3, "message is not a JSON object"),
    (mini_swe_agent.READER, MINI, put(("messages", 4), {"content": "x"}), 4,
     "message has no role"),
    (mini_swe_agent.READER, MINI,
     put(("messages", 2), {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]}), 2,
     "tool_calls[0] has no function object"),
    (mini_swe_agent.READER, MINI_RESPONSES,
     put(("messages", 5), {"object": "response", "output": None}), 5, "has no output list"),
    (mini_swe_agent.READER, MINI_RESPONSES,
     put(("messages", 7), {"object": "response", "output": [{"type": "function_call"}]}), 7,
     "no name"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("reader", "path", "change", "index", "reason"),
    BROKEN,
    ids=[f"{path}: {reason}" for _, path, _, _, reason in BROKEN],
)
def test_a_broken_item_is_a_load_error_with_its_index(
    reader: Reader, path: str, change: Change, index: int, reason: str
) -> None:
    with pytest.raises(LoadError) as caught:
        read_all(reader, edited(reader, path, change))
    assert caught.value.index == index and reason in caught.value.reason


# -- what the harness did, read back -----------------------------------------------------------

REPLAYED = [["call_rec_1"], ["call_rec_2"], ["call_rec_3"]]
STEPS = ["Step 1.", "Step 2.", "Step 3."]


@pytest.mark.parametrize(
    ("reader", "path", "script", "texts", "left_out"),
    [
        (claude_code.READER, "claude-code/e2e-replay.jsonl", [*REPLAYED, []],
         [*STEPS, "All done."], [0]),
        (codex.READER, "codex/e2e-replay.jsonl", [*REPLAYED, []], [*STEPS, "All done."], [1, 2]),
        (opencode.READER, "opencode/e2e-replay.json", [*REPLAYED, []], [*STEPS, "All done."], []),
        (mini_swe_agent.READER, "mini-swe-agent/e2e-replay.traj.json",
         [*REPLAYED, ["call_live_end"]], [*STEPS, ""], [10]),
    ],
    ids=["claude-code", "codex", "opencode", "mini-swe-agent"],
)  # fmt: skip
def test_the_log_of_a_run_replayed_by_the_proxy_gives_back_its_script(
    reader: Reader, path: str, script: list[list[str]], texts: list[str], left_out: list[int]
) -> None:
    t = read(reader, raw(path), "e2e")
    assert calls(t) == script
    assert [turn.text for turn in t.turns] == texts
    assert [n.index for n in t.skipped] == left_out  # the harness's bookkeeping, if any


@pytest.mark.parametrize(
    ("reader", "parent", "child", "tool", "argument", "script"),
    [
        (claude_code.READER, "claude-code/session.jsonl", "claude-code/subagent.jsonl", "Agent",
         "prompt", [["toolu_sub_1"], []]),
        (codex.READER, "codex/rollout.jsonl", "codex/subagent.jsonl", "spawn_agent", "message",
         [["call_sub_1"], []]),
        (opencode.READER, "opencode/session.json", "opencode/subagent.json", "task", "prompt",
         [["call_sub_1"], []]),
    ],
    ids=["claude-code", "codex", "opencode"],
)  # fmt: skip
def test_a_subagents_log_reads_as_a_conversation_of_its_own(
    reader: Reader, parent: str, child: str, tool: str, argument: str, script: list[list[str]]
) -> None:
    spawned = read(reader, raw(parent)).turns[1].tool_calls[0]
    t = read(reader, raw(child), "subagent")
    assert spawned.name == tool and t.task == json.loads(spawned.arguments)[argument]
    assert t.task == "Count the lines of existing.txt and report back."
    assert calls(t) == script
    assert t.turns[0].reasoning == "A quick count will do."


@pytest.mark.parametrize(
    ("reader", "path", "sent", "count"),
    [
        (opencode.READER, "opencode/session.json", "opencode/session.sent.json", 6),
        (openhands.READER, SDK, f"{SDK}/last-request.json", 6),
    ],
    ids=["opencode", "openhands"],
)
def test_tool_outputs_are_what_the_harness_sent_the_model(
    reader: Reader, path: str, sent: str, count: int
) -> None:
    """The last request the harness made (captured): the recorded outputs are the ones it sent,
    so observations compare like with like (OpenHands' terminal output with its exit code and
    working directory lines included)."""
    t = read(reader, raw(path))
    messages = json.loads((LOGS / sent).read_text())
    results = {m["tool_call_id"]: text_of(m["content"]) for m in messages if m["role"] == "tool"}
    assert len(results) == count
    assert {k: t.tool_outputs[k] for k in results} == results
