"""Sessions of several rounds, and branching at turn K, step by step.

A round runs from a user prompt to a text-only answer; the harness sends each follow-up
itself, so the engine compares it with the recorded one (masks apply) instead of splicing it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from proxy.apis.anthropic import parse_anthropic
from proxy.apis.chat import parse_chat
from proxy.apis.responses import parse_responses
from proxy.formats import load_bytes
from proxy.replay.engine import (
    AfterScript,
    Diverged,
    DivergencePolicy,
    Forward,
    ForwardReason,
    Rules,
    Scripted,
    Stop,
    decide,
)
from proxy.replay.trajectory import Trajectory

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
FOLLOW_UP = "Now also write the answer, dated 2026-01-02."


def tc(call_id: str) -> dict[str, Any]:
    args = json.dumps({"command": call_id})
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": args}}


def asst(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": f"out {call_id}"}


SYSTEM = {"role": "system", "content": "sys"}
TASK = {"role": "user", "content": "task"}
# round 1: a tool turn, then an answer; round 2: a tool turn, a hint, a tool turn, an answer
ROUND1 = [asst(tc("c1")), tool("c1"), {"role": "assistant", "content": "Part one done."}]
ROUND2_START = [asst(tc("c2")), tool("c2")]
HINT = {"role": "user", "content": "hint before c3"}
ROUND2_END = [asst(tc("c3")), tool("c3"), {"role": "assistant", "content": "All done."}]
RECORDED = [
    SYSTEM,
    TASK,
    *ROUND1,
    {"role": "user", "content": FOLLOW_UP},
    *ROUND2_START,
    HINT,
    *ROUND2_END,
]


def script(messages: list[dict[str, Any]] = RECORDED) -> Trajectory:
    return load_bytes(json.dumps(messages).encode(), name="conv", filename="conv.json")


def request(*history: dict[str, Any]) -> Any:
    return parse_chat({"model": "m", "messages": [SYSTEM, TASK, *history], "tools": TOOLS})


def user(text: str = FOLLOW_UP) -> dict[str, Any]:
    return {"role": "user", "content": text}


def test_the_script_holds_both_rounds() -> None:
    s = script()
    assert [t.round for t in s.turns] == [1, 1, 2, 2, 2] and s.rounds == 2
    assert [u.index for u in s.turns[2].follow_up] == [5]
    assert [u.index for u in s.turns[3].users_before] == [8]  # the hint is still spliced
    assert s.summary()["rounds"] == 2


def test_playbook_the_harness_sends_the_follow_up_and_gets_the_next_round() -> None:
    s = script()
    answer = decide(request(asst(tc("c1")), tool("c1")), s)
    assert isinstance(answer, Scripted) and answer.turn.number == 2 and answer.turn.final

    # the harness that stops at the answer sends nothing more; one that continues sends the
    # follow-up itself, and the next round is served
    follow = decide(request(*ROUND1, user()), s)
    assert isinstance(follow, Scripted) and follow.turn.number == 3 and follow.total == 5
    again = decide(request(*ROUND1, user()), s)  # a retry gets the same turn
    assert isinstance(again, Scripted) and again.turn is follow.turn

    fourth = decide(request(*ROUND1, user(), *ROUND2_START), s)
    assert isinstance(fourth, Scripted) and fourth.turn.number == 4

    history = [*ROUND1, user(), *ROUND2_START, *ROUND2_END]
    live = decide(request(*history, user("a third question")), s)
    assert isinstance(live, Forward) and live.reason is ForwardReason.SCRIPT_DONE
    assert live.held == 5
    # the hint the harness never saw goes back in before turn 4; the follow-up is not spliced
    [insertion] = live.splice
    assert [u.index for u in insertion.users] == [8] and insertion.position == 8


def test_a_different_follow_up_is_a_divergence_with_its_path() -> None:
    d = decide(request(*ROUND1, user("Now delete everything.")), script())
    assert isinstance(d, Diverged) and d.divergence.kind == "follow-up"
    assert d.divergence.turn == 3
    assert d.divergence.difference.path == "messages[5].content"
    assert '"Now delete everything."' in d.divergence.difference.actual

    # it is judged at every later step too, not only when the round opens
    later = decide(request(*ROUND1, user("Other."), *ROUND2_START), script())
    assert isinstance(later, Diverged) and later.divergence.difference.path == "messages[5].content"

    live = decide(
        request(*ROUND1, user("Other.")),
        script(),
        rules=Rules(on_divergence=DivergencePolicy.LIVE),
    )
    assert isinstance(live, Forward) and live.reason is ForwardReason.DIVERGED and live.held == 2


def test_a_request_with_no_follow_up_after_the_answer_is_a_divergence() -> None:
    d = decide(request(*ROUND1), script())
    assert isinstance(d, Diverged) and d.divergence.kind == "follow-up"
    assert d.divergence.difference.path == "messages[5]"
    assert "no user message after the answer" in d.divergence.difference.actual


def test_masks_and_whitespace_apply_to_the_follow_up() -> None:
    sent = user("Now also   write the answer,\ndated 2027-12-31.")
    rules = Rules(masks=(re.compile(r"\d{4}-\d\d-\d\d"),))
    assert isinstance(decide(request(*ROUND1, sent), script(), rules=rules), Scripted)
    assert isinstance(decide(request(*ROUND1, sent), script()), Diverged)


def test_a_follow_up_split_in_two_messages_is_compared_whole() -> None:
    halves = [user("Now also write the answer,"), user("dated 2026-01-02.")]
    assert isinstance(decide(request(*ROUND1, *halves), script()), Scripted)


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4])
def test_a_branch_replays_the_first_k_turns_then_goes_live(k: int) -> None:
    s = script()
    histories = [
        [],
        [asst(tc("c1")), tool("c1")],
        [*ROUND1, user()],
        [*ROUND1, user(), *ROUND2_START],
        [*ROUND1, user(), *ROUND2_START, asst(tc("c3")), tool("c3")],
    ]
    for step, history in enumerate(histories):
        d = decide(request(*history), s, branch=k)
        if step < k:
            assert isinstance(d, Scripted) and d.turn.number == step + 1 and d.total == k
        else:
            assert isinstance(d, Forward) and d.reason is ForwardReason.BRANCHED
            assert d.held == k
            # the live model's own turns after K are the live part, not a divergence
            live = decide(request(*history, asst(tc("live")), tool("live")), s, branch=k)
            assert isinstance(live, Forward) and live.reason is ForwardReason.BRANCHED
            break


def test_a_branch_splices_only_the_user_messages_of_the_turns_it_holds() -> None:
    s = script()
    at_4 = decide(request(*ROUND1, user(), *ROUND2_START, asst(tc("c3")), tool("c3")), s, branch=4)
    assert isinstance(at_4, Forward) and [u.index for u in at_4.splice[0].users] == [8]
    at_3 = decide(request(*ROUND1, user(), *ROUND2_START), s, branch=3)
    assert isinstance(at_3, Forward) and at_3.splice == ()  # the hint came after turn 3


def test_a_branch_at_or_beyond_the_script_is_the_whole_script() -> None:
    history = [*ROUND1, user(), *ROUND2_START, *ROUND2_END]
    for k in (5, 9):
        d = decide(request(*history), script(), branch=k)
        assert isinstance(d, Forward) and d.reason is ForwardReason.SCRIPT_DONE


def test_after_script_stop_applies_at_the_branch_point() -> None:
    d = decide(
        request(*ROUND1, user()), script(), branch=2, rules=Rules(after_script=AfterScript.STOP)
    )
    assert isinstance(d, Stop) and d.total == 2


def test_follow_ups_through_the_responses_and_anthropic_apis() -> None:
    s = script()
    items = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "bash",
            "arguments": '{"command": "c1"}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "out"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Part one done."}],
        },
        {"role": "user", "content": [{"type": "input_text", "text": FOLLOW_UP}]},
    ]
    tools = [{"type": "function", "name": "bash", "parameters": {}}]
    got = decide(parse_responses({"model": "m", "input": items, "tools": tools}), s)
    assert isinstance(got, Scripted) and got.turn.number == 3
    items[-1] = {"role": "user", "content": "something else"}
    other = decide(parse_responses({"model": "m", "input": items, "tools": tools}), s)
    assert isinstance(other, Diverged) and other.divergence.difference.path == "input[5].content"

    messages = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": "c1"}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "out"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Part one done."}]},
        {"role": "user", "content": [{"type": "text", "text": FOLLOW_UP}]},
    ]
    body = {"model": "m", "system": "sys", "messages": messages, "max_tokens": 9,
            "tools": [{"name": "bash", "input_schema": {}}]}  # fmt: skip
    got = decide(parse_anthropic(body), s)
    assert isinstance(got, Scripted) and got.turn.number == 3


def test_every_format_loads_the_rounds() -> None:
    items = [
        {"role": "user", "content": "task"},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "out"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "One."}],
        },
        {"role": "user", "content": "again"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Two."}],
        },
    ]
    responses = load_bytes(json.dumps(items).encode(), name="r", filename="r.json")
    assert responses.format == "responses" and responses.rounds == 2
    assert [u.index for u in responses.turns[2].follow_up] == [4]
    anthropic = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "out"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "One."}]},
        {"role": "user", "content": [{"type": "text", "text": "again"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Two."}]},
    ]
    loaded = load_bytes(json.dumps(anthropic).encode(), name="a", filename="a.json")
    assert loaded.format == "anthropic" and loaded.rounds == 2
    assert [u.index for u in loaded.turns[2].follow_up] == [4]
