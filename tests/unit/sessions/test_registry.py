"""Which script a session gets (admin, header, task, unclaimed; once, then it sticks), the branch
point fixed at binding, and what each request's decision adds to the session's state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.apis.chat import parse_chat
from proxy.errors import BadRequest, NotFound, TrajectoryUnusable
from proxy.formats import load_bytes
from proxy.replay.conversation import Conversation, Lane
from proxy.replay.engine import Forward, ForwardReason, Scripted, decide
from proxy.replay.faults import Fault, Kind
from proxy.replay.trajectory import Trajectory
from proxy.sessions.library import Library
from proxy.sessions.registry import Sessions, branch_point
from proxy.store.memory import MemoryStore

GREETING = Path(__file__).parents[3] / "examples" / "greeting.json"
RECORDED: list[dict[str, Any]] = json.loads(GREETING.read_text())
TASK = RECORDED[1]["content"]
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]


def script(name: str, task: str = TASK) -> Trajectory:
    messages = [RECORDED[0], {"role": "user", "content": task}, *RECORDED[2:]]
    return load_bytes(json.dumps(messages).encode(), name=name, filename=f"{name}.json")


def request(task: str = TASK, *history: dict[str, Any]) -> Conversation:
    body = {
        "model": "m",
        "messages": [RECORDED[0], {"role": "user", "content": task}, *history],
        "tools": TOOLS,
    }
    return parse_chat(body)


def sessions(*files: Trajectory, **options: Any) -> Sessions:
    options.setdefault("bind_on_task", False)
    return Sessions(MemoryStore(), Library(files), **options)


@pytest.mark.parametrize(
    ("value", "k"), [(None, None), ("0", 0), (" 3 ", 3), ("123456789", 123456789)]
)
def test_a_branch_point_is_a_whole_number_of_turns(value: str | None, k: int | None) -> None:
    assert branch_point(value) == k


@pytest.mark.parametrize("value", ["-1", "2.5", "two", "", "1234567890"])
def test_a_bad_branch_point_is_refused_with_where_it_came_from(value: str) -> None:
    with pytest.raises(BadRequest, match="turns must be a whole number") as refused:
        branch_point(value, "?turns")
    assert refused.value.param == "?turns"


async def test_each_new_session_takes_the_first_file_no_other_session_has() -> None:
    a, b = script("a", "other task a"), script("b", "other task b")
    s = sessions(a, b)
    first = await s.script_for("s1", request(), None)
    second = await s.script_for("s2", request(), None)
    third = await s.script_for("s3", request(), None)
    assert first.trajectory is a and second.trajectory is b and third.trajectory is None
    assert first.state is not None and first.state.script_source == "unclaimed"
    assert first.state.task_match is False  # bound, though its task is not the session's
    assert await s.store.owner("a") == "s1"


async def test_a_binding_sticks_whatever_the_session_sends_later() -> None:
    a, b = script("a"), script("b", "Write the docs.")
    s = sessions(a, b)
    await s.script_for("s1", request(), None)
    again = await s.script_for("s1", request("Write the docs."), None)
    assert again.trajectory is a


async def test_the_script_of_the_sessions_task_comes_before_the_first_file() -> None:
    other, same = script("other", "Write the docs."), script("same")
    s = sessions(other, same)
    bound = await s.script_for("s1", request(), None)
    assert bound.trajectory is same
    assert bound.state is not None
    assert (bound.state.script_source, bound.state.task_match) == ("task", True)
    # a second session of the same task gets it too when no other script has that task
    assert (await s.script_for("s2", request(), None)).trajectory is same


async def test_with_bind_on_task_a_session_of_no_known_task_gets_nothing() -> None:
    s = sessions(script("a", "Write the docs."), bind_on_task=True)
    unbound = await s.script_for("s1", request(), None)
    assert unbound.trajectory is None and unbound.state is None


async def test_the_trajectory_header_names_the_script() -> None:
    a, b = script("a"), script("b", "Write the docs.")
    bound = await sessions(a, b).script_for("s1", request(), "b")
    assert bound.trajectory is b
    assert bound.state is not None
    assert (bound.state.script_source, bound.state.task_match) == ("header", False)


async def test_a_header_naming_no_trajectory_or_no_name_is_refused() -> None:
    s = sessions(script("a"))
    with pytest.raises(NotFound, match="no trajectory named 'zzz'"):
        await s.script_for("s1", request(), "zzz")
    with pytest.raises(BadRequest, match="is not a valid name") as refused:
        await s.script_for("s1", request(), "../etc/passwd")
    assert refused.value.param == "x-replay-trajectory"
    assert await s.store.get("s1") is None  # nothing bound


async def test_the_branch_point_is_fixed_when_the_session_binds() -> None:
    s = sessions(script("a"))
    bound = await s.script_for("s1", request(), None, branch=2)
    assert bound.state is not None
    assert (bound.state.replay_turns, bound.state.turns_planned) == (2, 2)
    assert (await s.script_for("s1", request(), None, branch=2)).trajectory is not None
    with pytest.raises(BadRequest, match="branches at turn 2"):
        await s.script_for("s1", request(), None, branch=1)
    state = await s.store.get("s1")
    assert state is not None and state.replay_turns == 2  # the state stays


async def test_replay_turns_is_every_sessions_branch_point_unless_the_request_says() -> None:
    s = sessions(script("a"), script("b"), replay_turns=1)
    first = await s.script_for("s1", request(), None)
    second = await s.script_for("s2", request(), None, branch=0)
    assert first.state is not None and first.state.replay_turns == 1
    assert second.state is not None and second.state.replay_turns == 0


async def test_strict_mode_cannot_branch() -> None:
    with pytest.raises(BadRequest, match="--mode strict"):
        await sessions(script("a"), strict=True).script_for("s1", request(), None, branch=1)


async def test_a_script_that_changed_since_binding_is_refused_and_reported() -> None:
    s = sessions(script("a"))
    await s.script_for("s1", request(), None)
    state = await s.store.update("s1", lambda st: setattr(st, "script_digest", "f" * 64), now=1.0)
    with pytest.raises(TrajectoryUnusable, match="has changed since the session bound it"):
        await s.resolve(state)
    status = await s.status(state)
    assert "has changed" in status["script"]["error"]


async def test_a_scripted_turn_is_counted_with_its_event() -> None:
    a = script("a")
    s = sessions(a)
    await s.script_for("s1", request(), None)
    decision = decide(request(), a)
    assert isinstance(decision, Scripted)
    state, fault, _ = await s.record("s1", Lane.MAIN, decision, messages=2)
    assert fault is None
    # the greeting records no usage: the answer's usage is estimated
    assert (state.scripted_responses, state.turns_served) == (1, 1)
    assert (state.usage_estimated, state.usage_recorded) == (1, 0)
    assert state.forwarded == {}
    [event] = await s.store.events()
    assert (event["source"], event["turn"], event["lane"]) == ("scripted", "1/3", "main")


async def test_a_forward_after_the_script_marks_the_session_live_once() -> None:
    a = script("a")
    s = sessions(a)
    await s.script_for("s1", request(), None)
    history: list[dict[str, Any]] = []
    for turn in a.turns:
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]
        history.append({"role": "assistant", "content": "", "tool_calls": calls})
        history.extend(
            {"role": "tool", "tool_call_id": c.id, "content": "ok"} for c in turn.tool_calls
        )
    decision = decide(request(TASK, *history), a)
    assert isinstance(decision, Forward) and decision.reason is ForwardReason.SCRIPT_DONE
    state, _, _ = await s.record("s1", Lane.MAIN, decision, messages=len(history) + 2)
    assert state.forwarded == {"main": 1}
    assert (state.live_reason, state.live_after_turn, state.prefix_messages) == (
        "script used up",
        3,
        len(history) + 2,
    )
    since = state.live_since
    later, _, _ = await s.record("s1", Lane.MAIN, decision, messages=99)
    assert (later.live_since, later.prefix_messages, later.forwarded) == (
        since,
        len(history) + 2,
        {"main": 2},
    )


async def test_a_side_call_is_counted_in_its_lane_only() -> None:
    s = sessions()
    state, _, _ = await s.record("s1", Lane.TOOLLESS, None, preset="opencode")
    assert (state.forwarded, state.preset, state.scripted_responses) == (
        {"toolless": 1},
        "opencode",
        0,
    )


async def test_a_refused_request_is_an_error_never_a_forward() -> None:
    s = sessions()
    state, _, _ = await s.record("s1", Lane.TOOLLESS, None, refused=True)
    assert (state.errors, state.forwarded) == (1, {})
    [event] = await s.store.events()
    assert event["source"] == "refused"


async def test_a_planned_fault_takes_the_turn_then_the_turn_is_served() -> None:
    a = script("a")
    s = sessions(a, faults=(Fault(turn=1, kind=Kind.RATE_LIMITED),))
    await s.script_for("s1", request(), None)
    decision = decide(request(), a)
    state, fault, _ = await s.record("s1", Lane.MAIN, decision)
    assert fault == Fault(turn=1, kind=Kind.RATE_LIMITED)
    assert (state.scripted_responses, state.turns_served, state.faults_fired) == (0, 0, [1])
    assert [i["kind"] for i in state.injected] == ["429"]
    state, fault, _ = await s.record("s1", Lane.MAIN, decision)
    assert fault is None and (state.scripted_responses, state.turns_served) == (1, 1)
    assert [e["source"] for e in await s.store.events()] == ["fault", "scripted"]


async def test_a_session_plan_from_the_admin_api_wins_over_the_flag() -> None:
    s = sessions(faults=(Fault(turn=1, kind=Kind.DROP),))
    state = await s.store.update("s1", lambda st: None, now=1.0)
    assert s.fault_plan(state) == (Fault(turn=1, kind=Kind.DROP),)
    state.faults = [{"turn": 2, "kind": "500"}]
    assert s.fault_plan(state) == (Fault(turn=2, kind=Kind.SERVER_ERROR),)


async def test_each_recorded_exchange_answers_a_session_once() -> None:
    s = sessions()
    assert await s.use_recorded("s1", ["d:0", "d:1"]) == "d:0"
    assert await s.use_recorded("s1", ["d:0", "d:1"]) == "d:1"
    assert await s.use_recorded("s1", ["d:0", "d:1"]) is None
    assert await s.use_recorded("s2", ["d:0"]) == "d:0"  # another session's own
    assert [e["detail"] for e in await s.store.events()] == ["d:0", "d:1", "d:0"]


async def test_an_error_is_counted_and_its_detail_bounded() -> None:
    s = sessions()
    await s.record_error("s1", "main", "x" * 500)
    state = await s.store.get("s1")
    assert state is not None and state.errors == 1
    [event] = await s.store.events()
    assert (event["source"], len(event["detail"])) == ("error", 200)
