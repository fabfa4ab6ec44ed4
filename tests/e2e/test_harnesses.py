"""Real harnesses re-execute a recorded trajectory through the proxy, then continue live.

Per harness: a fresh git repository; a trajectory in the harness's own tool schema whose three
scripted turns create a file, edit a file, and run a command whose output lands in a file (each
also appends to runs.log, so a command run twice shows); a later user message before turn 3; a
front that fails the first answer of turn 2 so the harness retries it; a fake upstream that takes
over after the script and ends the run the harness's own way.

Marked `harness`: `pytest -m "not harness"` skips them locally; .ci/run runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.harness.install import Unavailable, install
from tests.helpers.harness.recipes import (
    CLOUD_MODELS,
    RECIPES,
    VERTEX_PROJECT,
    VERTEX_REGION,
    Recipe,
    assert_rebuilt,
    finished_its_own_way,
    install_name,
    run,
)
from tests.helpers.harness.versions import differs
from tests.helpers.servers import (
    FakeUpstream,
    FlakyFront,
    Seen,
    anthropic_text,
    anthropic_tool_use,
    gemini_text,
    responses_text,
    running,
    text,
    tool_call,
)

pytestmark = pytest.mark.harness

TASK = "Set up the greeting files in this repository."
STEPS = [
    "echo created > created.txt && echo step1 >> runs.log",
    "sed -i 's/old value/new value/' existing.txt && echo step2 >> runs.log",
    "echo $((6 * 7)) > answer.txt && echo step3 >> runs.log",
]
LATER = "Also keep the answer in answer.txt."


def call_id(k: int) -> str:
    return f"call_rec_{k + 1}"


def trajectory(recipe: Recipe) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "recorded system prompt"},
        {"role": "user", "content": TASK},
    ]
    for k, step in enumerate(STEPS):
        if k == 2:
            messages.append({"role": "user", "content": LATER})
        arguments = json.dumps(recipe.arguments(step))
        messages.append(
            {
                "role": "assistant",
                "content": f"Step {k + 1}.",
                "tool_calls": [
                    {
                        "id": call_id(k),
                        "type": "function",
                        "function": {"name": recipe.tool, "arguments": arguments},
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call_id(k), "content": f"RECORDED OUTPUT {k + 1}"}
        )
    return messages


TEXT_ANSWERS = {
    "chat": text,
    "responses": responses_text,
    "anthropic": anthropic_text,
    "gemini": gemini_text,
    "vertex": anthropic_text,
    "bedrock": anthropic_text,
}
PATHS = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
    "vertex": f"/v1/projects/{VERTEX_PROJECT}/locations/{VERTEX_REGION}/publishers/anthropic/"
    f"models/{CLOUD_MODELS['vertex']}:streamRawPredict",
    "bedrock": f"/model/{CLOUD_MODELS['bedrock']}/invoke-with-response-stream",
}


def live_answer(recipe: Recipe) -> Any:
    finish = recipe.finish
    if "text" in finish:
        end = TEXT_ANSWERS[recipe.api](finish["text"])
    else:
        end = tool_call(finish["tool"], json.dumps(finish["arguments"]), "call_live_end")

    def answer(seen: Seen) -> Any:
        if not seen.json.get("tools"):
            return TEXT_ANSWERS[recipe.api]("Greeting files")(seen)  # a title or summary side call
        return end(seen)

    return answer


@pytest.fixture(scope="session")
def harness_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("harness-installs")


def installed(name: str, logs: Path, track: str = "newest") -> None:
    try:
        install(name, logs / f"install-{name}-{track}.log", track)
    except Unavailable as exc:
        if os.environ.get("REPLAY_PROXY_REQUIRE_HARNESSES") and name != "openhands":
            pytest.fail(f"{name} cannot be installed: {exc}")
        pytest.skip(f"{name}: {exc}")


def tracks(names: Any) -> list[Any]:
    """Each recipe on its newest version, and on its oldest supported one where that differs
    (`claude-oldest`): `-k "not oldest"` leaves those out."""
    newest = [pytest.param(name, "newest", id=name) for name in names]
    oldest = [
        pytest.param(name, "oldest", id=f"{name}-oldest")
        for name in names
        if differs(install_name(name))
    ]
    return newest + oldest


@pytest.mark.parametrize(("name", "track"), tracks(RECIPES))
def test_harness_replays_the_script_for_real_then_continues_live(
    name: str,
    track: str,
    proxy: ProxyFactory,
    tmp_path: Path,
    write_trajectory: Any,
    harness_logs: Path,
) -> None:
    recipe = RECIPES[name]
    installed(install_name(name), harness_logs, track)
    fake = FakeUpstream(fallback=live_answer(recipe))
    path = write_trajectory(trajectory(recipe), name="recorded", folder=tmp_path / "trajectories")
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", trajectory=[path]) as url:
        front = FlakyFront(url.removesuffix("/v1"), turn="2/3")
        with running(front.app) as front_url:
            result = run(recipe, front_url + "/v1", tmp_path / "run", TASK, track=track)
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{result.tail()}\nupstream saw {len(fake.requests)} requests"
    assert finished_its_own_way(recipe, result, tmp_path / "run"), (
        f"{name} exited {result.returncode}{why}"
    )

    # every replayed command ran for real, exactly once, even with turn 2 retried
    repo = result.repo
    assert front.failed == 1, why
    assert_rebuilt(repo, why)
    status = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert {"?? created.txt", "?? answer.txt", "?? runs.log", " M existing.txt"} <= set(
        status.splitlines()
    )

    # the proxy's account: 3 turns served, turn 2 twice, side calls consumed nothing
    [main] = [s for s in sessions if s["script"] is not None]
    assert main["turns_served"] == 3 and main["scripted_responses"] == 4, main
    assert main["tool_results"]["returned"] == 3 and main["divergences"] == 0, main
    assert main["phase"] == "live"
    # the replay's verdict, as a CI check reads it (docs/record-strict-diff.md)
    assert main["divergences"] == 0 and main["complete"], main["incomplete"]

    # the first live request holds the replayed prefix with the harness's real results, and the
    # later user message spliced in right before the turn it preceded
    live = [r for r in fake.posts(PATHS[recipe.api]) if r.json.get("tools")]
    assert live, why
    calls, results, splice_ok = VIEWS[recipe.api](live[0].json)
    assert calls[:3] == [call_id(k) for k in range(3)], calls
    for k in range(3):
        assert len(results[call_id(k)]) == 1 and "RECORDED OUTPUT" not in results[call_id(k)][0]
    assert splice_ok, json.dumps(live[0].json)[-3000:]
    if name == "opencode":  # its title call went upstream and took no turn
        titles = [r for r in fake.posts() if not r.json.get("tools")]
        assert titles and main["forwarded"]["toolless"] >= 1


def chat_view(body: dict[str, Any]) -> tuple[list[str], dict[str, list[str]], bool]:
    messages = body["messages"]
    replies = [
        (i, m)
        for i, m in enumerate(messages)
        if m.get("role") == "assistant" and m.get("tool_calls")
    ]
    calls = [m["tool_calls"][0]["id"] for _, m in replies]
    results: dict[str, list[str]] = {}
    for m in messages:
        if m.get("role") == "tool":
            results.setdefault(m["tool_call_id"], []).append(json.dumps(m["content"]))
    third = replies[2][0]
    once = sum(1 for m in messages if m.get("content") == LATER) == 1
    return calls, results, once and messages[third - 1] == {"role": "user", "content": LATER}


def responses_view(body: dict[str, Any]) -> tuple[list[str], dict[str, list[str]], bool]:
    items = body["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    results: dict[str, list[str]] = {}
    for i in items:
        if i.get("type") == "function_call_output":
            results.setdefault(i["call_id"], []).append(json.dumps(i["output"]))
    hints = [
        n
        for n, i in enumerate(items)
        if i.get("role") == "user" and LATER in json.dumps(i.get("content"))
    ]
    third = next(
        n
        for n, i in enumerate(items)
        if i.get("call_id") == call_id(2) and i.get("type") == "function_call"
    )
    between = items[hints[0] + 1 : third] if len(hints) == 1 else [None]
    # only turn 3's own assistant items (its text, its reasoning) between the hint and its call
    ok = (
        len(hints) == 1
        and hints[0] < third
        and all(
            i
            and i.get("role", "assistant") == "assistant"
            and i.get("type") != "function_call_output"
            for i in between
        )
    )
    return calls, results, ok


def anthropic_view(
    body: dict[str, Any], hint: str | None = LATER
) -> tuple[list[str], dict[str, list[str]], bool]:
    messages = body["messages"]
    calls: list[str] = []
    results: dict[str, list[str]] = {}
    third = -1
    for n, m in enumerate(messages):
        for block in m["content"] if isinstance(m["content"], list) else []:
            if block.get("type") == "tool_use":
                calls.append(block["id"])
                if block["id"] == call_id(2):
                    third = n
            elif block.get("type") == "tool_result":
                results.setdefault(block["tool_use_id"], []).append(json.dumps(block["content"]))
    if hint is None:
        return calls, results, True
    before = messages[third - 1]
    texts = [
        b.get("text") for b in before["content"] if isinstance(b, dict) and b.get("type") == "text"
    ]
    everywhere = json.dumps(messages).count(hint)
    return calls, results, before["role"] == "user" and texts[-1:] == [hint] and everywhere == 1


def gemini_view(body: dict[str, Any]) -> tuple[list[str], dict[str, list[str]], bool]:
    contents = body["contents"]
    calls: list[str] = []
    results: dict[str, list[str]] = {}
    third = -1
    for n, content in enumerate(contents):
        for part in content["parts"]:
            if "functionCall" in part:
                calls.append(part["functionCall"].get("id"))
                if part["functionCall"].get("id") == call_id(2):
                    third = n
            elif "functionResponse" in part:
                response = part["functionResponse"]
                results.setdefault(response.get("id"), []).append(json.dumps(response["response"]))
    before = contents[third - 1]
    texts = [p.get("text") for p in before["parts"] if "text" in p]
    everywhere = json.dumps(contents).count(LATER)
    return calls, results, before["role"] == "user" and texts[-1:] == [LATER] and everywhere == 1


VIEWS = {
    "chat": chat_view,
    "responses": responses_view,
    "anthropic": anthropic_view,
    "gemini": gemini_view,
    "vertex": anthropic_view,
    "bedrock": anthropic_view,
}


# Claude Code's `Agent` tool (`Task` before 2.x) spawns a child whose calls carry the root's
# x-claude-code-session-id plus x-claude-code-agent-id naming the child (both builds send
# x-claude-code-parent-agent-id only from a child's own child, none for a child of the root). The call says run_in_background:
# false: 2.1.332 runs agents in the background by default and tells the root "Async agent
# launched", then wakes it again when the child is done; 2.1.197 waits by default.
AGENT_TASK = "Have a helper write the child line, then write the root line."
CHILD_STEP = "echo child >> runs.log"
ROOT_STEP = "echo root >> runs.log"
AGENT_ID = "x-claude-code-agent-id"
CHILD_REPORT = "CHILD REPORT: the child line is written."


def agent_trajectory() -> list[dict[str, Any]]:
    """Turn 1 spawns a child with Claude Code's `Agent` tool, turn 2 runs a root command."""
    spawn = {
        "description": "Write the child line",
        "prompt": f"Run `{CHILD_STEP}` with Bash, then report back.",
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    step = {"command": ROOT_STEP, "description": "write the root line"}
    return [
        {"role": "system", "content": "recorded system prompt"},
        {"role": "user", "content": AGENT_TASK},
        {"role": "assistant", "content": "Delegating.", "tool_calls": [
            {"id": call_id(0), "type": "function", "function": {"name": "Agent", "arguments": json.dumps(spawn)}}]},
        {"role": "tool", "tool_call_id": call_id(0), "content": "RECORDED CHILD REPORT"},
        {"role": "assistant", "content": "Now the root line.", "tool_calls": [
            {"id": call_id(1), "type": "function", "function": {"name": "Bash", "arguments": json.dumps(step)}}]},
        {"role": "tool", "tool_call_id": call_id(1), "content": "RECORDED OUTPUT 2"},
    ]  # fmt: skip


def child_answer(seen: Seen) -> Any:
    """The model upstream: the child runs its step with Bash, then reports; the root ends."""
    if not seen.json.get("tools"):
        return anthropic_text("Greeting files")(seen)
    if AGENT_ID not in seen.headers:
        return anthropic_text("All done.")(seen)
    if "tool_result" not in json.dumps(seen.json["messages"]):
        command = {"command": CHILD_STEP, "description": "child step"}
        return anthropic_tool_use("Bash", command, "toolu_child_1")(seen)
    return anthropic_text(CHILD_REPORT)(seen)


@pytest.mark.parametrize("track", [pytest.param(p.values[1], id=p.id) for p in tracks(["claude"])])
def test_claude_code_agent_tool_spawns_a_child_whose_calls_go_upstream(
    track: str, proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, harness_logs: Path
) -> None:
    installed("claude", harness_logs, track)
    fake = FakeUpstream(fallback=child_answer)
    path = write_trajectory(agent_trajectory(), name="agent", folder=tmp_path / "trajectories")
    recipe = RECIPES["claude"]
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", trajectory=[path]) as url:
        result = run(recipe, url, tmp_path / "run", AGENT_TASK, extra_args=["Agent"], track=track)
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    calls = fake.posts(PATHS["anthropic"])
    child = [r for r in calls if AGENT_ID in r.headers]
    root = [r for r in calls if AGENT_ID not in r.headers and r.json.get("tools")]
    why = f"\n{result.tail()}\nupstream saw {[dict(r.headers) for r in calls]}\n{sessions}"
    assert result.returncode == 0, why

    # the child ran its own command before the root's scripted turn 2 ran the root's
    assert (result.repo / "runs.log").read_text() == "child\nroot\n", why
    # the child's calls went upstream as subagent calls: its own agent id, the root's session
    assert len(child) == 2 and len({r.headers[AGENT_ID] for r in child}) == 1, why
    session_ids = {r.headers["x-claude-code-session-id"] for r in calls}
    assert len(session_ids) == 1, why
    [main] = sessions
    assert main["session"] in session_ids and main["script"] is not None, why
    assert main["forwarded"]["subagent"] == 2, why
    # the root's scripted turns were all served to the root, then it went live once
    assert main["turns_served"] == 2 and main["divergences"] == 0 and main["complete"], why
    assert main["phase"] == "live" and main["forwarded"]["main"] == len(root) == 1, why
    assert "Agent" in [t["name"] for t in root[0].json["tools"]], why
    # and the child's report came back to the root as the Agent call's result
    _, results, _ = anthropic_view(root[0].json, hint=None)
    assert len(results[call_id(0)]) == 1 and CHILD_REPORT in results[call_id(0)][0], why
