"""The restore verdict (proxy.replay.restore), and the observation checks it is made of: every
replayed turn's tool results are compared once, even those a request shows several at a time."""

from __future__ import annotations

import json
from typing import Any

from proxy.apis import FIELDS
from proxy.replay.engine import Forward, Scripted, decide
from proxy.replay.normalize import normalize
from proxy.replay.presets import PRESET_BY_NAME
from proxy.replay.restore import (
    RESTART_ONLY,
    RESTORED,
    UNVERIFIED,
    allows_handoff,
    describe,
    judge,
)
from tests.unit.replay.test_engine import RECORDED, asst, request, script, tc, tool

# a faithful harness: every result as recorded
FAITHFUL = [
    asst(tc("c1")),
    tool("c1", "out1"),
    {"role": "user", "content": "hint before turn 2"},
    asst(tc("c2"), tc("c3", "read", '{"p":1}')),
    tool("c2", "out2"),
    tool("c3", "out3"),
]


def test_every_result_as_recorded_is_restored() -> None:
    verdict = judge(script(), 2, {"c1", "c2", "c3"}, observation=None, divergence=None)
    assert verdict.verdict == RESTORED and verdict.calls == 3
    assert allows_handoff(verdict.as_dict())
    assert describe(verdict.as_dict()).endswith("all 3 replayed tool results came back as recorded")


def test_a_differing_result_or_a_divergence_is_restart_only_with_the_first_mismatch() -> None:
    mismatch = {"turn": 1, "path": "messages[3].content", "expected": "a", "actual": "b"}
    verdict = judge(script(), 2, {"c1", "c2", "c3"}, observation=mismatch, divergence=None)
    assert verdict.verdict == RESTART_ONLY and verdict.first == mismatch
    assert not allows_handoff(verdict.as_dict())
    diverged = {"turn": 2, "path": "messages[5].tool_calls[0].id", "expected": "c2"}
    left = judge(script(), 1, {"c1"}, observation=None, divergence=diverged)
    assert left.verdict == RESTART_ONLY and left.first == diverged


def test_a_result_that_never_came_back_is_restart_only() -> None:
    verdict = judge(script(), 2, {"c1", "c2"}, observation=None, divergence=None)
    assert verdict.verdict == RESTART_ONLY and verdict.first is not None
    assert verdict.first["turn"] == 2 and "c3" in verdict.first["reason"]


def test_calls_with_no_recorded_output_leave_it_unverified_never_restored() -> None:
    no_outputs = [m for m in RECORDED if m["role"] != "tool"]
    verdict = judge(script(no_outputs), 2, {"c1", "c2", "c3"}, observation=None, divergence=None)
    assert verdict.verdict == UNVERIFIED and verdict.unchecked == ("c1", "c2", "c3")
    assert not allows_handoff(verdict.as_dict())
    assert not allows_handoff(None)  # pending


def test_a_hand_off_before_any_call_is_restored_trivially() -> None:
    assert judge(script(), 0, set(), observation=None, divergence=None).verdict == RESTORED


def test_a_request_holding_several_unseen_turns_has_each_turns_results_compared() -> None:
    """A harness restarted with its history shows turns 1 and 2 at once: turn 1's result is
    compared too, not only the newest turn's."""
    changed = [*FAITHFUL]
    changed[1] = tool("c1", "something else")
    decision = decide(request(*changed), script(), observed=0)
    assert isinstance(decision, Forward)
    seen = decision.observations
    assert seen.divergence is not None and seen.divergence.turn == 1 and seen.checked == 2
    assert seen.divergence.difference.path == "messages[3].content"
    # what earlier requests compared is not compared again (and by default only the newest)
    assert decide(request(*changed), script(), observed=1).observations.divergence is None
    assert decide(request(*changed), script()).observations.divergence is None


def test_a_faithful_history_checks_through_the_held_turns() -> None:
    decision = decide(request(*FAITHFUL[:2]), script(), observed=0)
    assert isinstance(decision, Scripted) and decision.observations.checked == 1
    assert decision.observations.divergence is None


def test_claude_codes_agent_result_differs_between_runs_only_in_its_per_run_values() -> None:
    """An Agent tool's result names the child's id and what it cost: new on every run."""
    claude = PRESET_BY_NAME["claude-code"]
    one = (
        "agentId: a9aeb050a6110cc3d (use SendMessage with to: 'a9aeb050a6110cc3d', summary: "
        "'<5-10 word recap>' to continue this agent)\n<usage>subagent_tokens: 12\ntool_uses: 1\n"
        "duration_ms: 88</usage>"
    )
    other = one.replace("a9aeb050a6110cc3d", "b71f00c2d9e4a6b05").replace("88", "1204")
    other = other.replace("subagent_tokens: 12", "subagent_tokens: 40")
    masks = tuple(rule.pattern for rule in claude.masks)

    def applied(text: str) -> object:
        return normalize(
            text, masks, body=False, fields=FIELDS
        )  # as the observation check compares outputs

    assert applied(one) == applied(other)
    assert applied(one) != applied(one.replace("tool_uses: 1", "tool_uses: 2"))


def test_a_text_based_scripts_observation_at_the_cut_is_compared() -> None:
    """A harness that calls its tools through text: the observation it sends after turn K is
    compared with the one recorded before turn K+1, so a branch's hand-off is checked too."""
    from proxy.apis.chat import parse_chat
    from proxy.formats import load_bytes

    recorded = [
        {"role": "system", "content": "Answer with one bash block."},
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": "```bash\nls\n```"},
        {"role": "user", "content": "notes.txt"},
        {"role": "assistant", "content": "```bash\ncat notes.txt\n```"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Done."},
    ]
    text = load_bytes(json.dumps(recorded).encode(), name="t", filename="t.json")
    assert text.text_based

    def sent(observation: str) -> Any:
        return parse_chat(
            {"model": "m", "messages": [*recorded[:3], {"role": "user", "content": observation}]}
        )

    cut = decide(sent("secrets.txt"), text, branch=1, observed=0)
    assert isinstance(cut, Forward) and cut.observations.divergence is not None
    assert cut.observations.divergence.turn == 1
    assert decide(sent("notes.txt"), text, branch=1, observed=0).observations.divergence is None
