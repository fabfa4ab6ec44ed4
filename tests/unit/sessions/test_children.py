"""Which recorded child a live subagent replays (proxy.sessions.children), and its binding kept by
the registry: parallel children found by their own prompts in any order, once each, and a child's
lane replaying its whole script whatever the root's cut."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

from proxy.apis.chat import parse_chat
from proxy.formats import load_bytes
from proxy.replay.conversation import Conversation
from proxy.replay.trajectory import Child, Trajectory
from proxy.sessions import children
from proxy.sessions.library import Library
from proxy.sessions.registry import Sessions
from proxy.store.memory import MemoryStore
from proxy.store.state import BoundBy, SessionState

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip


def conversation(name: str, task: str, steps: int) -> Trajectory:
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for k in range(steps):
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call(f"{name}{k}", "bash", {})]},
            {"role": "tool", "tool_call_id": f"{name}{k}", "content": f"out {k}"},
        ]
    messages.append({"role": "assistant", "content": "done"})
    return load_bytes(json.dumps(messages).encode(), name=name, filename=f"{name}.json")


def run_with_two_children() -> Trajectory:
    spawn = [call("spawn_a", "Agent", {"prompt": "Check the tests."}),
             call("spawn_b", "Agent", {"prompt": "Check the docs."})]  # fmt: skip
    root = [
        {"role": "user", "content": "Review the repository."},
        {"role": "assistant", "content": None, "tool_calls": spawn},
        {"role": "tool", "tool_call_id": "spawn_a", "content": "tests ok"},
        {"role": "tool", "tool_call_id": "spawn_b", "content": "docs ok"},
        {"role": "assistant", "content": "Both are fine."},
    ]
    run = load_bytes(json.dumps(root).encode(), name="run", filename="run.json")
    kids = (
        Child("aaa", conversation("run:agent-aaa", "Check the tests.", 3), "spawn_a", "general"),
        Child("bbb", conversation("run:agent-bbb", "Check the docs.", 1), "spawn_b", "general"),
    )
    return replace(run, children=kids)


def asked(*texts: str) -> Conversation:
    messages = [{"role": "user", "content": t} for t in texts]
    return parse_chat({"model": "m", "messages": messages, "tools": TOOLS})


def replaying(run: Trajectory, planned: int | None = None) -> SessionState:
    """A root session bound to `run`, replaying its first `planned` turns (all: None)."""
    state = SessionState(id="root", created=0.0, last_seen=0.0)
    state.bind(name=run.name, digest=run.digest, by=BoundBy.HEADER, task_match=True,
               turns=len(run.turns), replay_turns=planned)  # fmt: skip
    return state


def test_parallel_children_find_their_own_recorded_child_in_any_order() -> None:
    run = run_with_two_children()
    root = replaying(run)
    # the second child asks first; a harness's reminder comes before its prompt
    said = children.prompts(asked("<system-reminder>today</system-reminder>", "Check the docs."))
    assert children.choose(run, said, {}, root) == "bbb"
    tests = children.prompts(asked("Check the tests."))
    assert children.choose(run, tests, {"x": "bbb"}, root) == "aaa"
    # once bound, a recorded child is not taken again; a prompt no child had takes none
    assert children.choose(run, said, {"x": "bbb"}, root) is None
    assert children.choose(run, children.prompts(asked("Something else.")), {}, root) is None


def test_a_child_a_live_turn_spawned_after_the_cut_is_the_live_models() -> None:
    """Cut before the spawning turn: a subagent asked the recorded child's task is not given the
    recorded child's turns; nor, once the root went live, is a child whose spawn is unknown."""
    run = run_with_two_children()
    said = children.prompts(asked("Check the docs."))
    assert children.choose(run, said, {}, replaying(run, 0)) is None
    unknown = replace(run, children=tuple(replace(c, spawned_by=None) for c in run.children))
    before, after = replaying(unknown), replaying(unknown)
    after.prefix_messages = 4  # its first live call was made
    assert children.choose(unknown, said, {}, before) == "bbb"
    assert children.choose(unknown, said, {}, after) is None
    assert children.not_started(unknown, {}, 1) == []  # when it was due cannot be told


def test_children_spawned_before_the_cut_and_never_started_are_named() -> None:
    run = run_with_two_children()
    assert [c.agent for c in children.not_started(run, {"x": "aaa"}, 1)] == ["bbb"]
    assert children.not_started(run, {}, 0) == []  # spawned after the cut: not due


def test_the_registry_binds_each_live_child_once_and_its_lane_replays_all_its_turns() -> None:
    run = run_with_two_children()
    sessions = Sessions(MemoryStore(), Library([run]), bind_on_task=False, replay_turns=1)

    async def scenario() -> None:
        root = asked("Review the repository.")
        await sessions.script_for("root", root, None)
        first = await sessions.child_for("root", "live-2", asked("Check the docs."))
        again = await sessions.child_for("root", "live-2", asked("Anything at all."))
        other = await sessions.child_for("root", "live-1", asked("Check the tests."))
        assert first == again == ("root.agent-bbb", "run:agent-bbb")
        assert other == ("root.agent-aaa", "run:agent-aaa")
        assert await sessions.child_for("root", None, asked("Check the docs.")) is None
        lane = await sessions.script_for(
            "root.agent-aaa", asked("Check the tests."), "run:agent-aaa", whole=True
        )
        # --replay-turns 1 cuts the root; the child's lane replays its whole script
        assert lane.trajectory is not None and len(lane.trajectory.turns) == 4
        assert lane.state is not None and lane.state.turns_planned == 4

    asyncio.run(scenario())
