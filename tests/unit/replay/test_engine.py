"""The decision, step by step, like a playbook: each step is a request history and what it gets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.apis.chat import parse_chat
from proxy.formats import load_bytes
from proxy.replay.conversation import Lane
from proxy.replay.engine import (
    Diverged,
    DivergencePolicy,
    Forward,
    ForwardReason,
    Rules,
    Scripted,
    decide,
)
from proxy.replay.splice import apply_chat
from proxy.replay.trajectory import Trajectory

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("bash", "read")]


def tc(call_id: str, name: str = "bash", args: str = '{"command": "ls"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


RECORDED = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "task"},
    {"role": "assistant", "content": None, "tool_calls": [tc("c1")]},
    {"role": "tool", "tool_call_id": "c1", "content": "out1"},
    {"role": "user", "content": "hint before turn 2"},
    {"role": "assistant", "content": None, "tool_calls": [tc("c2"), tc("c3", "read", '{"p": 1}')]},
    {"role": "tool", "tool_call_id": "c2", "content": "out2"},
    {"role": "tool", "tool_call_id": "c3", "content": "out3"},
    {"role": "user", "content": "trailing note"},
]


def script(messages: list[dict[str, Any]] = RECORDED) -> Trajectory:
    return load_bytes(json.dumps(messages).encode(), name="rec", filename="rec.json")


def request(*history: dict[str, Any], tools: list[Any] | None = TOOLS, **extra: Any) -> Any:
    body: dict[str, Any] = {"model": "m", "messages": [RECORDED[0], RECORDED[1], *history], **extra}
    if tools is not None:
        body["tools"] = tools
    return parse_chat(body)


def asst(*calls: dict[str, Any], content: Any = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def tool(call_id: str, content: str = "real output") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# the harness's own history as it grows: its tool results are real, not the recorded ones
TURN1 = [asst(tc("c1"))]
AFTER1 = [*TURN1, tool("c1")]
AFTER2 = [*AFTER1, asst(tc("c2"), tc("c3", "read", '{"p":1}')), tool("c2"), tool("c3")]


def test_playbook_a_session_from_first_turn_to_live() -> None:
    s = script()
    step1 = decide(request(), s)
    assert isinstance(step1, Scripted) and step1.turn.number == 1 and step1.total == 2

    step2 = decide(request(*AFTER1), s)
    assert isinstance(step2, Scripted) and step2.turn.number == 2

    step3 = decide(request(*AFTER2), s)
    assert isinstance(step3, Forward) and step3.reason is ForwardReason.SCRIPT_DONE
    assert step3.held == 2

    live = decide(request(*AFTER2, asst(tc("live1")), tool("live1")), s)
    assert isinstance(live, Forward) and live.reason is ForwardReason.SCRIPT_DONE


def test_a_retried_request_gets_the_same_turn_again() -> None:
    s = script()
    first = decide(request(*AFTER1), s)
    again = decide(request(*AFTER1), s)
    assert isinstance(first, Scripted) and isinstance(again, Scripted)
    assert first.turn is again.turn


def test_no_script_forwards() -> None:
    assert decide(request(), None) == Forward(ForwardReason.NO_SCRIPT)


def test_lanes_tool_less_and_subagent_calls_never_take_a_turn() -> None:
    assert request(tools=None).lane(subagent=False) is Lane.TOOLLESS
    assert request(tools=[]).lane(subagent=False) is Lane.TOOLLESS
    noop = [{"type": "function", "function": {"name": "_noop", "parameters": {}}}]
    assert request(tools=noop).lane(subagent=False) is Lane.TOOLLESS
    assert request(tool_choice="none").lane(subagent=False) is Lane.TOOLLESS
    assert request().lane(subagent=True) is Lane.SUBAGENT
    assert request().lane(subagent=False) is Lane.MAIN


@pytest.mark.parametrize(
    ("history", "turn", "path", "expected", "actual"),
    [
        ([asst(tc("other"))], 1, "messages[2].tool_calls[0].id", '"c1"', '"other"'),
        (
            [asst(tc("c1", "read"))],
            1,
            "messages[2].tool_calls[0].function.name",
            '"bash"',
            '"read"',
        ),
        (
            [asst(content="I refuse")],
            1,
            "messages[2].tool_calls[0]",
            'tool call "c1" (bash)',
            "nothing (the call is missing)",
        ),
        (
            [*AFTER1, asst(tc("c2"))],
            2,
            "messages[4].tool_calls[1]",
            'tool call "c3" (read)',
            "nothing (the call is missing)",
        ),
        (
            [asst(tc("c1"), tc("c9"))],
            1,
            "messages[2].tool_calls[1]",
            "nothing (no such call)",
            '"c9"',
        ),
    ],
)
def test_divergence_names_the_turn_and_the_path_of_the_first_difference(
    history: list[Any], turn: int, path: str, expected: str, actual: str
) -> None:
    decision = decide(request(*history), script())
    assert isinstance(decision, Diverged)
    d = decision.divergence
    assert (d.turn, d.difference.path, d.difference.expected, d.difference.actual) == (
        turn,
        path,
        expected,
        actual,
    )


def test_a_scripted_tool_the_request_does_not_offer_is_divergence() -> None:
    only_bash = [TOOLS[0]]
    decision = decide(request(*AFTER1, tools=only_bash), script())
    assert isinstance(decision, Diverged)
    assert decision.divergence.turn == 2
    assert decision.divergence.difference.path == "tools"
    assert "read" in decision.divergence.reason


def test_live_policy_forwards_the_divergent_request_and_carries_the_divergence() -> None:
    decision = decide(
        request(asst(tc("other"))), script(), rules=Rules(on_divergence=DivergencePolicy.LIVE)
    )
    assert isinstance(decision, Forward) and decision.reason is ForwardReason.DIVERGED
    assert decision.divergence is not None and decision.divergence.turn == 1
    # once live after a divergence, the session stays live whatever the history
    assert decide(request(), script(), live_after_divergence=True) == Forward(
        ForwardReason.DIVERGED
    )


def test_a_final_text_turn_is_matched_by_its_text_modulo_whitespace() -> None:
    s = script([*RECORDED[:4], {"role": "assistant", "content": "All  done.\n"}])
    assert isinstance(decide(request(*AFTER1), s), Scripted)
    done = decide(request(*AFTER1, {"role": "assistant", "content": "All done."}), s)
    assert isinstance(done, Forward) and done.reason is ForwardReason.SCRIPT_DONE
    other = decide(request(*AFTER1, {"role": "assistant", "content": "Something else"}), s)
    assert isinstance(other, Diverged) and other.divergence.difference.path == "messages[4].content"
    assert '"Something else"' in other.divergence.difference.actual


def test_empty_assistant_messages_in_the_history_are_not_turns() -> None:
    decision = decide(request({"role": "assistant", "content": ""}, *AFTER1), script())
    assert isinstance(decision, Scripted) and decision.turn.number == 2


def test_splice_puts_user_messages_where_they_stood_and_never_twice() -> None:
    s = script()
    body = {"model": "m", "messages": [RECORDED[0], RECORDED[1], *AFTER2], "tools": TOOLS}
    decision = decide(parse_chat(body), s)
    assert isinstance(decision, Forward)
    spliced = apply_chat(body["messages"], decision.splice)
    roles = [(m["role"], m.get("content") if m["role"] == "user" else None) for m in spliced]
    assert roles == [
        ("system", None),
        ("user", "task"),
        ("assistant", None),
        ("tool", None),
        ("user", "hint before turn 2"),
        ("assistant", None),
        ("tool", None),
        ("tool", None),
        ("user", "trailing note"),
    ]
    # a live turn later: the trailing note stays before it, after turn 2's results
    later = [*body["messages"], asst(tc("live1")), tool("live1")]
    decision2 = decide(parse_chat({**body, "messages": later}), s)
    assert isinstance(decision2, Forward)
    spliced2 = apply_chat(later, decision2.splice)
    assert spliced2[8] == {"role": "user", "content": "trailing note"}
    assert spliced2[9]["tool_calls"][0]["id"] == "live1"
    # a request that already holds them gets nothing inserted again
    assert decide(parse_chat({**body, "messages": spliced2}), s).splice == ()  # type: ignore[union-attr]


def test_no_splice_while_turns_are_still_scripted() -> None:
    s = script()
    decision = decide(request(*AFTER1), s)
    assert isinstance(decision, Scripted)


def test_divergence_going_live_splices_only_the_turns_the_history_holds() -> None:
    s = script()
    history = [*AFTER1, asst(tc("not-c2")), tool("not-c2")]
    decision = decide(request(*history), s, rules=Rules(on_divergence=DivergencePolicy.LIVE))
    assert isinstance(decision, Forward) and decision.held == 1
    assert decision.splice == ()  # the hint belongs before turn 2, which this history does not hold
