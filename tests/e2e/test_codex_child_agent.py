"""Codex CLI spawning a child agent from a scripted `spawn_agent` call (its `multi_agent_v1`
namespace, served as recorded): the child's calls, which keep the root's session-id and add
x-openai-subagent and x-codex-parent-thread-id, go upstream as subagent calls and take no turn;
the root's later scripted turns are served to the root."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.e2e.test_harnesses import harness_logs, installed
from tests.helpers.harness.recipes import CODEX_SOCKET, finished_its_own_way, run
from tests.helpers.servers import FakeUpstream, Seen, responses_call, responses_text, running

pytestmark = pytest.mark.harness
__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py

TASK = "Have a helper agent write child.txt, then note it in root.log."
# the root and its child meet at a FIFO the root made before spawning it: the child's write waits
# for the root's read and the other way round, so the run's order is fixed without a clock
MAKE_FIFO = "mkfifo done.fifo"
CHILD_COMMAND = "echo from-the-child > child.txt && echo done > done.fifo"
ROOT_COMMAND = "timeout 120 sh -c 'read line < done.fifo' && echo root >> root.log"


def call(call_id: str, name: str, arguments: dict[str, Any], **dispatch: str) -> dict[str, Any]:
    made: dict[str, Any] = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    if dispatch:
        made["dispatch"] = {"responses": dispatch}
    return made


SCRIPT = [
    {"role": "system", "content": "recorded system prompt"},
    {"role": "user", "content": TASK},
    {"role": "assistant", "content": "A place to meet.", "tool_calls": [
        call("call_fifo", "exec_command", {"cmd": MAKE_FIFO})
    ]},
    {"role": "tool", "tool_call_id": "call_fifo", "content": "RECORDED FIFO"},
    {"role": "assistant", "content": "Spawning a helper.", "tool_calls": [
        call("call_spawn", "spawn_agent", {"message": "Write child.txt."}, namespace="multi_agent_v1")
    ]},
    {"role": "tool", "tool_call_id": "call_spawn", "content": "RECORDED SPAWN"},
    {"role": "assistant", "content": "Noting it.", "tool_calls": [
        call("call_root", "exec_command", {"cmd": ROOT_COMMAND})
    ]},
    {"role": "tool", "tool_call_id": "call_root", "content": "RECORDED ROOT"},
]  # fmt: skip


def upstream_answer(seen: Seen) -> Any:
    """The live model: the child runs one command then finishes; the root finishes."""
    if not seen.headers.get("x-openai-subagent"):
        return responses_text("All done.")(seen)
    ran = any(i.get("type") == "function_call_output" for i in seen.json.get("input", []))
    if ran or not seen.json.get("tools"):
        return responses_text("Child done.")(seen)
    return responses_call("exec_command", json.dumps({"cmd": CHILD_COMMAND}), "call_child")(seen)


def test_a_scripted_spawn_agent_starts_a_child_whose_calls_go_upstream(
    proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, harness_logs: Path
) -> None:
    installed("codex", harness_logs)
    fake = FakeUpstream(fallback=upstream_answer)
    path = write_trajectory(SCRIPT, name="spawns", folder=tmp_path / "trajectories")
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", trajectory=[path]) as url:
        result = run(CODEX_SOCKET, url, tmp_path / "run", TASK)
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{result.tail()}\nupstream saw {len(fake.requests)} requests"
    assert finished_its_own_way(CODEX_SOCKET, result, tmp_path / "run"), why
    assert (result.repo / "child.txt").read_text() == "from-the-child\n", why
    assert (result.repo / "root.log").read_text() == "root\n", why

    [main] = [s for s in sessions if s["script"] is not None]
    assert main["turns_served"] == 3 and main["divergences"] == 0, main
    # the child's call that ran its command went upstream (child.txt says it ran); the call with
    # its answer races the root's end of the run, which codex exec does not hold for it, so it
    # is not counted on (CI once saw the run end first, under load)
    assert main["forwarded"]["subagent"] >= 1, main
    children = [c for c in main["subagents"] if c["kind"] == "collab_spawn"]
    assert children and children[0]["parent"] and children[0]["child"], main["subagents"]

    child_calls = [r for r in fake.posts("/v1/responses") if r.headers.get("x-openai-subagent")]
    assert {r.headers["x-openai-subagent"] for r in child_calls} >= {"collab_spawn"}, why
    spawned = [r for r in child_calls if r.headers["x-openai-subagent"] == "collab_spawn"]
    assert spawned[0].headers["session-id"] == main["session"]  # the root's session, another lane
    assert spawned[0].headers["x-codex-parent-thread-id"] == children[0]["parent"]
    # the root went live after its two scripted turns, its spawn call whole in its history
    root_live = [r for r in fake.posts("/v1/responses") if not r.headers.get("x-openai-subagent")]
    assert root_live, why
    items = root_live[0].json["input"]
    spawn = next(
        i for i in items if i.get("call_id") == "call_spawn" and i["type"] == "function_call"
    )
    assert spawn.get("namespace") == "multi_agent_v1"
