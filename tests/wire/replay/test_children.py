"""A run's subagents replayed from their own transcripts, over real sockets with the anthropic SDK
as Claude Code: the transcript and its child's (Claude Code 2.1.197's own files, tests/fixtures/
harness_logs/claude-code) laid out as Claude Code keeps them, the child bound by its lineage
header and its task, its lane replayed turn by turn, and the restore verdict of the whole run."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tests.conftest import ProxyFactory

FIXTURES = Path(__file__).parents[2] / "fixtures" / "harness_logs" / "claude-code"
AGENT = "a9aeb050a6110cc3d"  # the recorded child's id
LIVE_CHILD = "b71f00c2d9e4a6b05"  # the id Claude Code gives the child in the resumed run
SYSTEM = "You are Claude Code, Anthropic's official CLI for Claude."
REMINDER = "<system-reminder>\nToday's date is 2026-12-07.\n</system-reminder>\n\n"
TOOLS: list[Any] = [
    {"name": n, "description": n, "input_schema": {"type": "object"}} for n in ("Bash", "Agent")
]
# what the workspace gives back for each recorded call, as the recorded run got it
OUTPUTS = {
    "toolu_cc_1": "existing.txt",
    "toolu_cc_2": "old value",
    "toolu_cc_4": "Exit code 1\ncat: missing.txt: No such file or directory",
    "toolu_sub_1": "1 existing.txt",
}


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    """The session file with its child's transcript and meta file where Claude Code puts them."""
    project = tmp_path / "projects" / "-tmp-repo"
    children = project / "sess" / "subagents"
    children.mkdir(parents=True)
    shutil.copy(FIXTURES / "session.jsonl", project / "sess.jsonl")
    shutil.copy(FIXTURES / "subagent.jsonl", children / f"agent-{AGENT}.jsonl")
    shutil.copy(FIXTURES / "subagent.meta.json", children / f"agent-{AGENT}.meta.json")
    return project / "sess.jsonl"


def user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


def results(outputs: list[tuple[str, Any]]) -> dict[str, Any]:
    content = [{"type": "tool_result", "tool_use_id": i, "content": o} for i, o in outputs]
    return {"role": "user", "content": content}


def ask(c: anthropic.Anthropic, messages: list[dict[str, Any]], **headers: str) -> Any:
    raw = c.messages.with_raw_response.create(
        model="claude-test",
        max_tokens=1000,
        system=SYSTEM,
        messages=messages,
        tools=TOOLS,
        extra_headers=headers,
    )
    return raw.parse(), raw.headers


def child_run(c: anthropic.Anthropic, task: str, output: Callable[[str], str]) -> list[str]:
    """The child's loop as Claude Code runs it; the x-replay-turn of each answer."""
    messages = [user(REMINDER, task)]
    turns = []
    while True:
        answer, headers = ask(c, messages, **{"x-claude-code-agent-id": LIVE_CHILD})
        turns.append(headers.get("x-replay-turn"))
        calls = [b for b in answer.content if b.type == "tool_use"]
        if not calls:
            return turns
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in answer.content]},
            results([(b.id, output(b.id)) for b in calls]),
        ]


Child = Callable[[anthropic.Anthropic, str, Callable[[str], str]], list[str]]


def root_run(
    c: anthropic.Anthropic,
    child_output: Callable[[str], str],
    *,
    child: bool = True,
    runs: Child | None = None,
) -> tuple[Any, Any, list[str]]:
    """The root's loop, running the child when the root's Agent call asks for it; (the last
    answer, its headers, the child's turns)."""
    messages = [user(REMINDER, "Set up the greeting files in this repository.")]
    child_turns: list[str] = []
    while True:
        answer, headers = ask(c, messages)
        calls = [b for b in answer.content if b.type == "tool_use"]
        if not calls:
            return answer, headers, child_turns
        outputs: list[tuple[str, Any]] = []
        for call in calls:
            if call.name != "Agent":
                outputs.append((call.id, OUTPUTS[call.id]))
                continue
            if child:
                child_turns = (runs or child_run)(c, call.input["prompt"], child_output)
            report = (
                f"agentId: {LIVE_CHILD} (use SendMessage with to: '{LIVE_CHILD}', summary: "
                "'<5-10 word recap>' to continue this agent)\n<usage>subagent_tokens: 57\n"
                "tool_uses: 1\nduration_ms: 2310</usage>"
            )
            parts = [{"type": "text", "text": "existing.txt has 1 line."}]
            outputs.append((call.id, [*parts, {"type": "text", "text": report}]))
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in answer.content]},
            results(outputs),
        ]


def settings(transcript: Path) -> dict[str, Any]:
    # no upstream at all, the cut after turn 3, fenced: nothing may need a model
    return {"trajectory": [transcript], "replay_turns": 3, "after_script": "stop", "fence": True}


def test_a_child_replays_its_own_transcript_and_the_run_is_restored(
    proxy: ProxyFactory, transcript: Path
) -> None:
    with proxy(**settings(transcript)) as url:
        root = url.removesuffix("/v1")
        c = anthropic.Anthropic(base_url=f"{root}/s/cc-1", api_key="sk-ant-x", max_retries=0)
        _, headers, child_turns = root_run(c, OUTPUTS.__getitem__)
        status = httpx.get(f"{root}/replay/sessions/cc-1").json()
        lane = httpx.get(f"{root}/replay/sessions/cc-1.agent-{AGENT}").json()
    assert child_turns == ["1/2", "2/2"]  # both of the child's recorded turns, from its file
    assert headers["x-replay-source"] == "stop"
    assert status["restore"]["verdict"] == "restored", status["restore"]
    assert status["restore"]["handoff_turn"] == 3 and status["restore"]["calls"] == 4
    [child] = status["children"]
    assert child["agent"] == AGENT and child["spawned_by"] == "toolu_cc_3"
    assert child["live_child"] == LIVE_CHILD and child["session"] == f"cc-1.agent-{AGENT}"
    assert lane["turns_served"] == 2 and lane["script"]["name"] == f"sess:agent-{AGENT}"
    assert status["errors"] == 0 and lane["errors"] == 0
    assert status["forwarded"] == {"main": 0, "toolless": 0, "subagent": 0}


def test_a_childs_changed_tool_result_makes_the_run_restart_only(
    proxy: ProxyFactory, transcript: Path
) -> None:
    def changed(call_id: str) -> str:
        return "2 existing.txt" if call_id == "toolu_sub_1" else OUTPUTS[call_id]

    with proxy(**settings(transcript)) as url:
        root = url.removesuffix("/v1")
        c = anthropic.Anthropic(base_url=f"{root}/s/cc-2", api_key="sk-ant-x", max_retries=0)
        root_run(c, changed)
        verdict = httpx.get(f"{root}/replay/sessions/cc-2/restore").json()
    first = verdict["first_mismatch"]
    assert verdict["verdict"] == "restart-only", verdict
    assert first["lane"] == "subagent" and "toolu_sub_1" in first["reason"]
    assert "2 existing.txt" in first["actual"]


def test_a_recorded_child_the_harness_never_started_is_reported(
    proxy: ProxyFactory, transcript: Path
) -> None:
    with proxy(**settings(transcript)) as url:
        root = url.removesuffix("/v1")
        c = anthropic.Anthropic(base_url=f"{root}/s/cc-3", api_key="sk-ant-x", max_retries=0)
        root_run(c, OUTPUTS.__getitem__, child=False)
        verdict = httpx.get(f"{root}/replay/sessions/cc-3/restore").json()
    assert verdict["verdict"] == "restart-only" and verdict["children_not_started"] == [AGENT]
    assert verdict["first_mismatch"]["kind"] == "child"
    assert verdict["first_mismatch"]["turn"] == 2  # the turn whose Agent call spawned it


def test_a_subagent_asked_something_else_is_fenced_not_replayed(
    proxy: ProxyFactory, transcript: Path
) -> None:
    with proxy(**settings(transcript)) as url:
        root = url.removesuffix("/v1")
        c = anthropic.Anthropic(base_url=f"{root}/s/cc-4", api_key="sk-ant-x", max_retries=0)
        ask(c, [user(REMINDER, "Set up the greeting files in this repository.")])
        with pytest.raises(anthropic.PermissionDeniedError) as fenced:
            ask(c, [user("Something no child was asked.")], **{"x-claude-code-agent-id": "x1"})
        status = httpx.get(f"{root}/replay/sessions/cc-4").json()
    error = fenced.value.body
    assert isinstance(error, dict) and error["error"]["type"] == "permission_error"
    assert "fenced until its hand-off" in fenced.value.message
    assert "subagent x1 of cc-4" in fenced.value.message
    assert status["children"][0]["live_child"] is None


# Codex: the root's rollout and its child thread's (Codex 0.171.0's own files, tests/fixtures/
# harness_logs/codex), laid out in a sessions folder as Codex keeps them
CODEX = FIXTURES.parent / "codex"
ROOT_THREAD = "01a242a7-9e44-7ae0-b0e0-0483f6f308a4"
CHILD_THREAD = "01a242a7-9efd-7de1-a4c7-85945523abdc"
CODEX_OUTPUTS = {  # what the workspace gives back, as the recorded run got it
    "call_cx_1": "Chunk ID: 1a2b3c\nWall time: 0.0010 seconds\nProcess exited with code 0\n"
    "Original token count: 4\nOutput:\nexisting.txt\n",
    "call_cx_2": "Chunk ID: 4d5e6f\nWall time: 0.0020 seconds\nProcess exited with code 0\n"
    "Original token count: 3\nOutput:\nold value\n",
    # the new thread's id and nickname: new on every run (the resumed run's, not the recorded)
    "call_cx_3": json.dumps(
        {"agent_id": "019b0000-1111-7222-8333-444455556666", "nickname": "Hypatia"},
        separators=(",", ":"),
    ),
    "call_sub_1": "Chunk ID: 777777\nWall time: 0.0030 seconds\nProcess exited with code 0\n"
    "Original token count: 4\nOutput:\n1 existing.txt\n",
}


@pytest.fixture
def rollout(tmp_path: Path) -> Path:
    day = tmp_path / "sessions" / "2026" / "12" / "04"
    day.mkdir(parents=True)
    root = day / f"rollout-2026-12-04T20-03-20-{ROOT_THREAD}.jsonl"
    shutil.copy(CODEX / "rollout.jsonl", root)
    # the child started the next day: found in the same sessions tree
    (tmp_path / "sessions" / "2026" / "12" / "05").mkdir()
    child = tmp_path / "sessions" / "2026" / "12" / "05" / f"rollout-x-{CHILD_THREAD}.jsonl"
    shutil.copy(CODEX / "subagent.jsonl", child)
    return root


def responses_run(
    c: Any, input_items: list[dict[str, Any]], headers: dict[str, str]
) -> tuple[Any, Any]:
    raw = c.responses.with_raw_response.create(
        model="gpt-test",
        instructions="You are a coding agent running in the Codex CLI.",
        input=input_items,
        tools=[
            {"type": "function", "name": n, "parameters": {"type": "object"}}
            for n in ("exec_command", "spawn_agent")
        ],
        extra_headers=headers,
    )
    return raw.parse(), raw.headers


def codex_loop(
    c: Any, task: str, headers: dict[str, str], on_call: Callable[[Any], str], turns: int
) -> tuple[list[str], Any]:
    """A Codex thread's loop: its context, its prompt, then each answer's calls run; `turns`
    requests at most. (The x-replay-turn of each answer, the last headers.)"""
    items: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "<environment_context>\n<cwd>/repo</cwd>\n</environment_context>",
        },
        {"role": "user", "content": task},
    ]
    said: list[str] = []
    last = None
    for _ in range(turns):
        answer, last = responses_run(c, items, headers)
        said.append(last.get("x-replay-turn"))
        calls = [o for o in answer.output if o.type == "function_call"]
        if not calls:
            break
        for o in answer.output:
            items.append(o.model_dump(exclude_none=True))
        items += [{"type": "function_call_output", "call_id": o.call_id, "output": on_call(o)}
                  for o in calls]  # fmt: skip
    return said, last


def test_a_codex_child_thread_replays_its_own_rollout_bound_by_its_thread_id(
    proxy: ProxyFactory, rollout: Path
) -> None:
    import openai

    root_headers = {"session-id": "cx-1", "thread-id": "live-root"}
    child_headers = {
        "session-id": "cx-1",
        "thread-id": "live-child",
        "x-openai-subagent": "collab_spawn",
        "x-codex-parent-thread-id": "live-root",
    }
    child_turns: list[str] = []

    def run_call(call: Any) -> str:
        if call.name == "spawn_agent":
            message = json.loads(call.arguments)["message"]
            child_turns.extend(
                codex_loop(c, message, child_headers, lambda o: CODEX_OUTPUTS[o.call_id], 3)[0]
            )
        return CODEX_OUTPUTS[call.call_id]

    with proxy(trajectory=[rollout], replay_turns=2, after_script="stop", fence=True) as url:
        c = openai.OpenAI(base_url=url, api_key="sk-x", max_retries=0)
        task = "Set up the greeting files in this repository."
        root_turns, _ = codex_loop(c, task, root_headers, run_call, 4)
        root = url.removesuffix("/v1")
        status = httpx.get(f"{root}/replay/sessions/cx-1").json()
    assert root_turns == ["1/2", "2/2", "stop"] and child_turns == ["1/2", "2/2"]
    [child] = status["children"]
    assert child["agent"] == CHILD_THREAD and child["spawned_by"] == "call_cx_3"
    assert child["live_child"] == "live-child" and child["kind"] == "collab_spawn"
    assert status["restore"]["verdict"] == "restored", status["restore"]


# opencode: the root session's export and its child session's (opencode's own, tests/fixtures/
# harness_logs/opencode), each exported to a file named by its session id
OPENCODE = FIXTURES.parent / "opencode"
ROOT_SESSION, CHILD_SESSION = "ses_dbd9a892affeyunXUMGhKtRPlg", "ses_dbd9a7ffbffeSj5kZfjh7ur0uY"
OPENCODE_OUTPUTS = {
    "call_oc_1": "existing.txt\n",
    "call_oc_2": "old value\n",
    "call_sub_1": "1 existing.txt\n",
}


def test_an_opencode_child_session_replays_its_own_export_bound_by_its_parent_header(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    import openai

    shutil.copy(OPENCODE / "session.json", tmp_path / f"{ROOT_SESSION}.json")
    shutil.copy(OPENCODE / "subagent.json", tmp_path / f"{CHILD_SESSION}.json")
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
             for n in ("bash", "read", "task")]  # fmt: skip
    system = {"role": "system", "content": "You are opencode, an interactive CLI tool."}

    def loop(c: Any, task: str, headers: dict[str, str], output: Callable[[Any], str]) -> list[str]:
        messages: list[Any] = [system, {"role": "user", "content": task}]
        said = []
        while True:
            raw = c.chat.completions.with_raw_response.create(
                model="agent-model", messages=messages, tools=tools, extra_headers=headers
            )
            said.append(raw.headers.get("x-replay-turn"))
            message = raw.parse().choices[0].message
            if not message.tool_calls:
                return said
            messages.append(message.model_dump(exclude_none=True))
            messages += [{"role": "tool", "tool_call_id": t.id, "content": output(t)}
                         for t in message.tool_calls]  # fmt: skip

    child_turns: list[str] = []
    child_headers = {"x-session-affinity": "ses_live_child", "x-parent-session-id": "ses_live_root"}

    def run_call(call: Any) -> str:
        if call.function.name != "task":
            return OPENCODE_OUTPUTS[call.id]
        prompt = json.loads(call.function.arguments)["prompt"]
        child_turns.extend(loop(c, prompt, child_headers, lambda t: OPENCODE_OUTPUTS[t.id]))
        return (  # the child session's id: new on every run
            '<task id="ses_live_child" state="completed">\n<task_result>\nexisting.txt has 1 '
            "line.\n</task_result>\n</task>"
        )

    path = tmp_path / f"{ROOT_SESSION}.json"
    with proxy(trajectory=[path], replay_turns=2, after_script="stop", fence=True) as url:
        c = openai.OpenAI(base_url=url, api_key="sk-x", max_retries=0)
        task = '"Set up the greeting files in this repository."'
        root_turns = loop(c, task, {"x-session-affinity": "ses_live_root"}, run_call)
        status = httpx.get(url.removesuffix("/v1") + "/replay/sessions/ses_live_root").json()
    assert root_turns == ["1/2", "2/2", "stop"] and child_turns == ["1/2", "2/2"]
    [child] = status["children"]
    assert child["agent"] == CHILD_SESSION and child["spawned_by"] == "call_oc_3"
    assert child["live_child"] == "ses_live_child"
    assert status["restore"]["verdict"] == "restored", status["restore"]


def test_a_subagent_a_live_turn_spawns_after_the_cut_is_the_live_models(
    proxy: ProxyFactory, transcript: Path, upstream: tuple[Any, str]
) -> None:
    """Cut at turn 1, before the recorded Agent call: a child asked the recorded child's task
    afterwards is live work, not the recording's."""
    from tests.helpers.servers import anthropic_text

    fake, upstream_url = upstream
    fake.then(anthropic_text("live root turn"), anthropic_text("live child answer"))
    with proxy(trajectory=[transcript], replay_turns=1, upstream=upstream_url) as url:
        root = url.removesuffix("/v1")
        c = anthropic.Anthropic(base_url=f"{root}/s/cc-5", api_key="sk-ant-x", max_retries=0)
        messages = [user(REMINDER, "Set up the greeting files in this repository.")]
        answer, headers = ask(c, messages)
        assert headers["x-replay-turn"] == "1/1"
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in answer.content]},
            results([(b.id, OUTPUTS[b.id]) for b in answer.content if b.type == "tool_use"]),
        ]
        _, headers = ask(c, messages)  # the cut: live
        child = [user(REMINDER, "Count the lines of existing.txt and report back.")]
        _, child_headers = ask(c, child, **{"x-claude-code-agent-id": LIVE_CHILD})
        status = httpx.get(f"{root}/replay/sessions/cc-5").json()
    assert headers["x-replay-source"] == "upstream"
    assert child_headers["x-replay-source"] == "upstream"
    assert status["children"][0]["live_child"] is None


def test_a_child_lane_that_goes_past_its_recording_makes_the_run_restart_only(
    proxy: ProxyFactory, transcript: Path, upstream: tuple[Any, str]
) -> None:
    from tests.helpers.servers import anthropic_text

    fake, upstream_url = upstream
    fake.then(anthropic_text("the child goes on, live"), anthropic_text("the root goes on"))

    def child_and_more(
        c: anthropic.Anthropic, task: str, output: Callable[[str], str]
    ) -> list[str]:
        turns = child_run(c, task, output)
        # one more call after its recorded final answer: past its recording
        call = {"type": "tool_use", "id": "toolu_sub_1", "name": "Bash", "input": {}}
        messages = [
            user(REMINDER, task),
            {"role": "assistant", "content": [call]},
            results([("toolu_sub_1", OUTPUTS["toolu_sub_1"])]),
            {"role": "assistant", "content": "existing.txt has 1 line."},
            user("And the other files?"),
        ]
        _, headers = ask(c, messages, **{"x-claude-code-agent-id": LIVE_CHILD})
        return [*turns, headers["x-replay-source"]]

    with proxy(trajectory=[transcript], replay_turns=3, upstream=upstream_url) as url:
        root = url.removesuffix("/v1")
        c = anthropic.Anthropic(base_url=f"{root}/s/cc-6", api_key="sk-ant-x", max_retries=0)
        _, _, child_turns = root_run(c, OUTPUTS.__getitem__, runs=child_and_more)
        verdict = httpx.get(f"{root}/replay/sessions/cc-6/restore").json()
    assert child_turns[-1] == "upstream"
    assert verdict["verdict"] == "restart-only", verdict
    assert verdict["first_mismatch"]["lane"] == "subagent"
    assert verdict["first_mismatch"]["kind"] == "child"


def test_the_roots_verdict_waits_for_a_child_that_has_not_ended(
    proxy: ProxyFactory, rollout: Path
) -> None:
    """Codex's spawn returns at once: the root's replay may end before its child's. The verdict
    is pending until the child's lane ends, then settled with it."""
    import openai

    root_headers = {"session-id": "cx-2", "thread-id": "live-root"}
    child_headers = {"session-id": "cx-2", "thread-id": "live-child",
                     "x-openai-subagent": "collab_spawn", "x-codex-parent-thread-id": "live-root"}  # fmt: skip
    child: list[str] = []

    def run_call(call: Any) -> str:
        if call.name == "spawn_agent":  # the child makes its first call only, for now
            child.append(json.loads(call.arguments)["message"])
            codex_loop(c, child[0], child_headers, lambda o: CODEX_OUTPUTS[o.call_id], 1)
        return CODEX_OUTPUTS[call.call_id]

    with proxy(trajectory=[rollout], replay_turns=2, after_script="stop", fence=True) as url:
        c = openai.OpenAI(base_url=url, api_key="sk-x", max_retries=0)
        task = "Set up the greeting files in this repository."
        codex_loop(c, task, root_headers, run_call, 4)
        read = url.removesuffix("/v1") + "/replay/sessions/cx-2/restore"
        waiting = httpx.get(read).json()
        codex_loop(c, child[0], child_headers, lambda o: CODEX_OUTPUTS[o.call_id], 3)  # it ends
        settled = httpx.get(read).json()
    assert waiting["verdict"] == "pending" and waiting["settled"] is False, waiting
    assert waiting["waiting_for_children_after_turn"] == 2
    assert settled["verdict"] == "restored" and settled["handoff_turn"] == 2, settled
