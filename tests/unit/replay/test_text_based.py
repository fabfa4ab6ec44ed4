"""Text-based scripts step by step: a harness that calls its tools through text.

The trajectory here uses the XML action protocol of SWE-Gym / R2E-style environments (and
OpenHands' non-native function calling): `<function=NAME><parameter=KEY>...</parameter></function>`
in the answer, the output sent back as a user message. No request carries tools.
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
from proxy.replay.conversation import Conversation, Lane
from proxy.replay.engine import (
    AfterScript,
    Diverged,
    DivergencePolicy,
    Forward,
    ForwardReason,
    ObservationPolicy,
    Rules,
    Scripted,
    Stop,
    decide,
)
from proxy.replay.text_based import belongs
from proxy.replay.trajectory import Trajectory

SYSTEM = "You are an agent. Call a function as <function=NAME><parameter=KEY>VALUE</parameter>."
TASK = "Fix the failing test. Today is 2026-01-02."


def action(command: str) -> str:
    return f"Let me look.\n<function=execute_bash>\n<parameter=command>{command}</parameter>\n</function>"


def observation(output: str) -> str:
    return f"EXECUTION RESULT of [execute_bash]:\n{output}\n[Command finished with exit code 0]"


ACTIONS = [action("ls"), action("cat test.py"), "<function=finish>\n</function>"]
OUTPUTS = [observation("test.py"), observation("assert 1 == 2")]
RECORDED: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": TASK},
    {"role": "assistant", "content": ACTIONS[0]},
    {"role": "user", "content": OUTPUTS[0]},
    {"role": "assistant", "content": ACTIONS[1]},
    {"role": "user", "content": OUTPUTS[1]},
    {"role": "assistant", "content": ACTIONS[2]},
]


def script(messages: list[dict[str, Any]] = RECORDED) -> Trajectory:
    return load_bytes(json.dumps(messages).encode(), name="xml", filename="xml.json")


def history(turns: int, outputs: list[str] = OUTPUTS) -> list[dict[str, Any]]:
    """What the harness sends after `turns` answers: each answer, then its observation."""
    out: list[dict[str, Any]] = []
    for k in range(turns):
        out.append({"role": "assistant", "content": ACTIONS[k]})
        out.append({"role": "user", "content": outputs[k]})
    return out


def request(*messages: dict[str, Any], system: str = SYSTEM, task: str = TASK) -> Conversation:
    return parse_chat(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": task},
                *messages,
            ],
        }
    )


def test_a_script_without_tool_calls_is_text_based_with_observations_between_turns() -> None:
    s = script()
    assert s.text_based and s.rounds == 1 and len(s.turns) == 3
    assert [t.text for t in s.turns] == ACTIONS
    assert [[u.content for u in t.follow_up] for t in s.turns] == [[], OUTPUTS[:1], OUTPUTS[1:]]
    assert s.skipped == () and s.dropped == ()
    with_a_call = [
        *RECORDED[:2],
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "assistant", "content": "Done."},
    ]  # fmt: skip
    assert not script(with_a_call).text_based  # tool calls anywhere: today's rules


def test_a_tool_less_request_belongs_only_with_the_scripts_system_prompt_and_task() -> None:
    s = script()
    assert request().lane(subagent=False) is Lane.TOOLLESS
    assert belongs(request(), s)
    assert belongs(request(*history(2)), s)  # the history is the engine's to judge
    assert not belongs(request(system="You are a title generator."), s)  # a side call
    assert not belongs(request(task="Another task."), s)  # an unrelated session
    # harnesses re-wrap what they echo back; masks take out what changes between runs
    assert belongs(request(task="  Fix the failing test.\nToday is 2026-01-02. "), s)
    assert not belongs(request(task=TASK.replace("01-02", "03-04")), s)
    assert belongs(
        request(task=TASK.replace("01-02", "03-04")), s, [re.compile(r"\d{4}-\d\d-\d\d")]
    )
    calls = script([*RECORDED[:2], {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {"name": "bash"}}]}])  # fmt: skip
    assert not belongs(request(), calls)


def test_each_request_gets_the_turn_its_history_is_due_for() -> None:
    s = script()
    for k in range(3):
        d = decide(request(*history(k)), s)
        assert isinstance(d, Scripted) and d.turn.number == k + 1 and d.turn.final
        assert d.observations.divergence is None
        again = decide(request(*history(k)), s)  # a retry gets the same turn
        assert isinstance(again, Scripted) and again.turn is d.turn


def test_a_different_observation_is_reported_and_the_policy_decides() -> None:
    s = script()
    changed = history(2, [OUTPUTS[0], observation("assert 1 == 3")])
    d = decide(request(*changed), s)  # warn (default): served, reported
    assert isinstance(d, Scripted) and d.turn.number == 3
    observed = d.observations.divergence
    assert observed is not None and observed.kind == "observation" and observed.turn == 2
    assert observed.difference.path == "messages[5].content"
    assert "assert 1 == 2" in observed.difference.expected
    assert "assert 1 == 3" in observed.difference.actual

    error = decide(request(*changed), s, rules=Rules(on_observation=ObservationPolicy.ERROR))
    assert isinstance(error, Diverged) and error.divergence.kind == "observation"
    live = decide(request(*changed), s, rules=Rules(on_observation=ObservationPolicy.LIVE))
    assert isinstance(live, Forward) and live.reason is ForwardReason.DIVERGED and live.held == 2
    assert live.splice == ()  # the harness sent every observation itself

    # an older observation is not compared again: only the newest one, when it came
    d = decide(request(*history(2, [observation("other"), OUTPUTS[1]])), s)
    assert isinstance(d, Scripted) and d.observations.divergence is None
    # a masked observation is the same
    rules = Rules(on_observation=ObservationPolicy.ERROR, masks=(re.compile(r"1 == \d"),))
    d = decide(request(*changed), s, rules=rules)
    assert isinstance(d, Scripted)


def test_a_missing_observation_is_one_too() -> None:
    without = [{"role": "assistant", "content": ACTIONS[0]}]
    d = decide(request(*without), script(), rules=Rules(on_observation=ObservationPolicy.ERROR))
    assert isinstance(d, Diverged) and d.divergence.kind == "observation"
    assert d.divergence.difference.actual == "nothing (no user message after the answer)"


def test_a_different_answer_in_the_history_is_a_divergence() -> None:
    s = script()
    other = [
        {"role": "assistant", "content": action("rm -rf /")},
        {"role": "user", "content": OUTPUTS[0]},
    ]
    d = decide(request(*other), s)
    assert isinstance(d, Diverged) and d.divergence.kind == "history" and d.divergence.turn == 1
    assert d.divergence.difference.path == "messages[2].content"
    live = decide(request(*other), s, rules=Rules(on_divergence=DivergencePolicy.LIVE))
    assert isinstance(live, Forward) and live.reason is ForwardReason.DIVERGED and live.held == 0
    # re-wrapped whitespace is not a difference
    rewrapped = [{"role": "assistant", "content": "  " + ACTIONS[0].replace("\n", "\n\n") + "\n"}]
    d = decide(request(*rewrapped, {"role": "user", "content": OUTPUTS[0]}), s)
    assert isinstance(d, Scripted) and d.turn.number == 2


def test_after_the_script_live_or_stop_and_a_branch_goes_live_at_its_point() -> None:
    s = script()
    done = [
        *history(2),
        {"role": "assistant", "content": ACTIONS[2]},
        {"role": "user", "content": "more"},
    ]
    d = decide(request(*done), s)
    assert isinstance(d, Forward) and d.reason is ForwardReason.SCRIPT_DONE and d.held == 3
    assert d.observations.divergence is None  # nothing was recorded after the last turn
    assert isinstance(decide(request(*done), s, rules=Rules(after_script=AfterScript.STOP)), Stop)
    first = decide(request(), s, branch=1)
    assert isinstance(first, Scripted) and first.turn.number == 1 and first.total == 1
    after = decide(request(*history(1)), s, branch=1)
    assert isinstance(after, Forward) and after.reason is ForwardReason.BRANCHED and after.held == 1


@pytest.mark.parametrize("api", ["responses", "anthropic"])
def test_the_other_apis_read_the_same_conversation(api: str) -> None:
    s = script()
    turns = history(2)
    if api == "responses":
        items = [{"role": "user", "content": TASK}, *turns]
        conv = parse_responses({"model": "m", "instructions": SYSTEM, "input": items})
    else:
        conv = parse_anthropic(
            {"model": "m", "max_tokens": 10, "system": SYSTEM, "messages": [{"role": "user", "content": TASK}, *turns]}
        )  # fmt: skip
    assert conv.lane(subagent=False) is Lane.TOOLLESS and belongs(conv, s)
    d = decide(conv, s)
    assert isinstance(d, Scripted) and d.turn.number == 3 and d.observations.divergence is None


def test_a_tool_calling_request_keeps_the_follow_up_rules() -> None:
    """A script with no tool call is text-based only for tool-less requests: a harness that offers
    tools and typed a different follow-up has diverged, as in any conversation."""
    chat = [*RECORDED[:2], {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "And now?"}, {"role": "assistant", "content": "Bye."}]  # fmt: skip
    s = script(chat)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    sent = [*chat[:3], {"role": "user", "content": "Something else?"}]
    with_tools = parse_chat({"model": "m", "messages": sent, "tools": tools})
    d = decide(with_tools, s)
    assert isinstance(d, Diverged) and d.divergence.kind == "follow-up"
    d = decide(parse_chat({"model": "m", "messages": sent}), s)  # tool-less: an observation
    assert isinstance(d, Scripted) and d.observations.divergence is not None


def test_the_system_prompt_is_every_system_message_before_the_task() -> None:
    """As the API parsers read it: a system and a developer message are one system prompt."""
    two = [{"role": "system", "content": SYSTEM}, {"role": "developer", "content": "Repo: /testbed"}, *RECORDED[1:]]  # fmt: skip
    s = script(two)
    assert s.system == f"{SYSTEM}\nRepo: /testbed"
    sent = parse_chat({"model": "m", "messages": two[:3]})
    assert belongs(sent, s) and not belongs(request(), s)
    assert not belongs(request(system="anything"), script(RECORDED[1:]))  # none means none
    assert belongs(parse_chat({"model": "m", "messages": RECORDED[1:2]}), script(RECORDED[1:]))
