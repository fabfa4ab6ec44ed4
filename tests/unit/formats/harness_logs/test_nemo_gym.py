"""NeMo-Gym rollout files, read from NeMo-Gym's published example rollouts (fixtures README): what
is NeMo-Gym's own. test_readers.py holds it, with every reader, to the contract."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.commands.check import check
from proxy.errors import LoadError
from proxy.formats import read_with
from proxy.formats.harness_logs.nemo_gym import READER, SINGLE
from proxy.replay.trajectory import Trajectory
from tests.conftest import ROOT
from tests.unit.formats.harness_logs.published import LOGS, encoded, read_all, values

HERE = LOGS / "nemo-gym"
CORPUS = ROOT / "tests/fixtures/corpus/nemo-gym"


def rows(name: str) -> list[Any]:
    lines: list[Any] = values(f"nemo-gym/{name}")
    return lines


def read_bytes(data: bytes, name: str = "rollouts") -> list[Trajectory]:
    return read_all(READER, data, name)


def read(lines: list[Any], name: str = "rollouts") -> list[Trajectory]:
    return read_bytes(encoded(READER, lines), name)


def test_one_trajectory_per_line_with_reasoning_and_parallel_calls() -> None:
    found = read_bytes((HERE / "xlam_fc.jsonl").read_bytes(), "xlam_fc")
    assert [t.name for t in found] == [f"xlam_fc.{k}" for k in range(1, 6)]
    assert len({t.digest for t in found}) == 5
    t = found[2]
    assert t.system is not None and t.system.startswith("You are a helpful AI assistant")
    assert t.task == "Where can I find live giveaways for beta access and games?"
    assert [[c.id for c in turn.tool_calls] for turn in t.turns] == [
        [
            "chatcmpl-tool-cd62ffcc3b58426bb5194edb59d4a752",
            "chatcmpl-tool-21c7909276c04b2aa2cc2003669f3983",
        ],
        [],
    ]
    first = t.turns[0]
    assert [c.arguments for c in first.tool_calls] == ['{"type": "beta"}', '{"type": "game"}']
    assert first.reasoning is not None and "live giveaways" in first.reasoning
    assert t.turns[1].final and "GamerPower API" in t.turns[1].text
    assert t.turns[1].reasoning is not None
    assert t.tool_outputs["chatcmpl-tool-21c7909276c04b2aa2cc2003669f3983"] == (
        '{"detail":"Not Found"}'
    )
    # notes and `check` name an item by its line and its place in input or output
    assert [t.place(turn.index) for turn in t.turns] == [
        "line 3, response.output[0]",
        "line 3, response.output[6]",
    ]
    assert t.skipped == () and t.dropped == ()


def test_a_multi_turn_environment_puts_its_user_messages_in_the_output() -> None:
    found = read_bytes((HERE / "blackjack.jsonl").read_bytes(), "blackjack")
    assert [len(t.turns) for t in found] == [2, 1, 1, 2, 1]
    t = found[0]
    assert t.task == "Deal me in."
    assert [u.content for u in t.turns[0].users_before] == [
        "Your hand: [8, 5] = 13\nDealer shows: A\nRespond with <action>hit</action> or "
        "<action>stand</action>."
    ]
    assert [turn.text for turn in t.turns] == ["<action>hit</action>"] * 2
    # the actions are text (<action>...</action>): a text-based script, whose user messages
    # between turns are the environment's observations
    assert t.text_based
    assert [turn.round for turn in t.turns] == [1, 1]
    [follow_up] = t.turns[1].follow_up
    assert isinstance(follow_up.content, str) and follow_up.content.startswith(
        "Your hand: [8, 5, 3] = 16"
    )


def test_a_string_input_is_the_task_and_instructions_the_system_prompt() -> None:
    [t] = read_bytes((HERE / "google_search-line1.jsonl").read_bytes(), "search")
    assert t.name == "search.1"
    assert t.task is not None and t.task.startswith("Consider a Carnot engine")
    assert t.system is not None and t.system.startswith("Solve the following problem.")
    assert len(t.turns) == 1 and t.turns[0].final


def test_a_file_of_one_rollout_is_one_json_document() -> None:
    data = (HERE / "google_search-line1.jsonl").read_bytes()
    assert SINGLE.miss(json.loads(data)) is None
    [t] = read_with(SINGLE, data, name="search", filename="search.jsonl")
    assert t.name == "search.1" and t.format == "nemo-gym"
    assert t.task is not None and t.task.startswith("Consider a Carnot engine")
    assert SINGLE.miss([{"role": "user", "content": "hi"}]) is not None


def test_reward_and_metadata_stay_out_of_the_script() -> None:
    [c] = READER.convert([(0, rows("xlam_fc.jsonl")[0])], "x.jsonl")
    text = json.dumps(c.messages)
    assert "num_expected" not in text and "predicted_calls" not in text and "reward" not in text
    assert c.label == "1" and c.places is not None
    assert [c.places[k] for k in c.indexes[:2]] == [
        "line 1, responses_create_params.input[0]",
        "line 1, responses_create_params.input[1]",
    ]


def test_labels_are_file_line_numbers_and_a_cut_off_last_line_is_left_out() -> None:
    data = (HERE / "blackjack.jsonl").read_bytes()
    found = read_bytes(b"\n" + data.rstrip(b"\n")[:-40])  # a blank first line, a half-written last
    assert [t.name for t in found] == [f"rollouts.{k}" for k in range(2, 6)]
    assert [(n.index, n.reason[:25]) for n in found[0].skipped] == [
        (5, "line 6 is cut off (the fi")
    ]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda r: "not a rollout", "line 4 is not a JSON object"),
        (lambda r: {**r, "response": {"id": "x"}}, 'line 4: "response" has no "output" list'),
        (lambda r: {**r, "responses_create_params": None}, 'no "responses_create_params"'),
        (
            lambda r: {**r, "responses_create_params": {"input": {"role": "user"}}},
            "responses_create_params.input must be a list",
        ),
        (
            lambda r: {**r, "response": {"output": [{"type": "function_call", "call_id": "c"}]}},
            "line 4, response.output[0]: function_call item has no name",
        ),
        (
            lambda r: {**r, "responses_create_params": {"input": ["text"]}},
            "line 4, responses_create_params.input[0]: item is not a JSON object",
        ),
        (  # lists are transitions only when NeMo-Gym says so (contains_transitions)
            lambda r: {**r, "response": {"output": [[{"role": "user", "content": "hi"}]]}},
            "line 4, response.output[0]: is a list, not an item, and "
            "response.contains_transitions does not say the output is transitions",
        ),
    ],
)
def test_a_line_that_cannot_be_read_is_left_out_with_its_line(change: Any, reason: str) -> None:
    lines = rows("xlam_fc.jsonl")
    lines[3] = change(lines[3])
    found = read(lines)
    assert [t.name for t in found] == ["rollouts.1", "rollouts.2", "rollouts.3", "rollouts.5"]
    [note] = [n for n in found[0].skipped if n.reason.startswith("left out")]
    assert note.where == "line 4" and reason in note.reason
    assert not any(n.reason.startswith("left out") for t in found[1:] for n in t.skipped)


def test_a_file_none_of_whose_lines_can_be_read_is_an_error_naming_them() -> None:
    lines = [{**r, "response": {"output": [["transition"]]}} for r in rows("xlam_fc.jsonl")]
    with pytest.raises(LoadError) as caught:
        read(lines)
    assert "no conversation in it could be read: line 1, response.output[0]: is a list" in (
        caught.value.reason
    )
    assert "(and 2 more)" in caught.value.reason


def test_a_tool_call_with_broken_arguments_leaves_its_line_out() -> None:
    lines = rows("xlam_fc.jsonl")
    lines[1]["response"]["output"][2]["arguments"] = "{oops"
    found = read(lines)
    assert [t.name for t in found] == ["rollouts.1", "rollouts.3", "rollouts.4", "rollouts.5"]
    [note] = [n for n in found[0].skipped if n.reason.startswith("left out")]
    assert note.reason.startswith("left out: line 2, response.output[")
    assert "arguments is not valid JSON" in note.reason


def test_task_inputs_are_not_rollouts() -> None:
    # the materialized inputs NeMo-Gym writes beside the rollouts: no line records an answer
    lines = [
        {"responses_create_params": r["responses_create_params"]} for r in rows("xlam_fc.jsonl")
    ]
    with pytest.raises(LoadError) as caught:
        read(lines)
    assert "NeMo-Gym task inputs, not rollouts" in caught.value.reason


def test_a_broken_first_line_is_left_out_like_any_other() -> None:
    lines: list[Any] = [["not", "a", "rollout"], *rows("xlam_fc.jsonl")[:2]]
    found = read(lines)
    assert [t.name for t in found] == ["rollouts.2", "rollouts.3"]
    assert found[0].skipped[0].reason == "left out: line 1 is not a JSON object"
    # a line whose params are not an object cannot crash the check for answers
    with pytest.raises(LoadError):
        read([{"responses_create_params": {"input": "hi"}}, {"responses_create_params": "oops"}])


def corpus(name: str) -> list[Any]:
    return [json.loads(line) for line in (CORPUS / name).read_text().splitlines()]


def test_transitions_are_read_as_their_last_the_whole_conversation() -> None:
    # aviary's agent (return_transitions): each transition is its whole input so far
    found = read_bytes((CORPUS / "aviary.jsonl").read_bytes(), "aviary")
    assert [t.name for t in found] == ["aviary.1", "aviary.2"]
    t = found[0]
    assert t.task is not None and t.task.startswith("Weng earns $12 an hour for babysitting.")
    assert [[c.id for c in turn.tool_calls] for turn in t.turns] == [
        ["call_0hWFYwBvZghsoIwtRIYxuFKL"],
        [],
    ]
    assert t.tool_outputs["call_0hWFYwBvZghsoIwtRIYxuFKL"] == "10"
    assert t.turns[1].final and t.turns[1].text.startswith("Weng earned $10 for 50 minutes")
    # places name the item in the last transition
    assert [t.place(turn.index) for turn in t.turns] == [
        "line 1, response.output[1][1]",
        "line 1, response.output[1][3]",
    ]
    assert not any(n.reason.startswith("left out") for n in t.skipped)


def test_verifiers_transitions_resend_the_answers_as_input_and_still_read() -> None:
    # each step is its prompt (input messages, the earlier answers among them) and its answer
    [t] = read_bytes((CORPUS / "verifiers_wordle.jsonl").read_bytes(), "wordle")
    assert t.system is not None and t.system.startswith("You are a competitive game player.")
    assert [turn.text for turn in t.turns] == ["[crane]", "[crane]"]
    assert t.text_based
    [follow_up] = t.turns[1].follow_up
    assert isinstance(follow_up.content, str)
    assert follow_up.content.startswith("You attempted an invalid move.")


def test_the_conversation_is_the_transition_even_when_the_input_is_another_prompt() -> None:
    # the verifiers agent runs its environment's own prompt: input is not what the model saw
    [t] = read_bytes((CORPUS / "verifiers_ifeval.jsonl").read_bytes(), "ifeval")
    [row] = corpus("verifiers_ifeval.jsonl")
    given = row["responses_create_params"]["input"][0]["content"]
    assert given.startswith("Write me a template for a product description")
    assert t.task is not None and t.task.startswith('Given the sentence "Two young boys')
    assert [turn.text for turn in t.turns] == ["what are the two young boys holding?"]


def test_a_row_of_trajectory_output_without_request_params_is_read() -> None:
    # deepswe's published rollouts: the items under trajectory.output, no responses_create_params
    [t] = read_bytes((CORPUS / "deepswe_trajectory.jsonl").read_bytes(), "deepswe")
    assert t.name == "deepswe.1" and t.format == "nemo-gym"
    calls = [[c.id for c in turn.tool_calls] for turn in t.turns]
    assert len(calls) == 37 and all(len(ids) == 1 for ids in calls)
    assert calls[0] == ["call_wiCBkDB14OvCukg08kvMhfuZ"]
    assert calls[-1] == ["call_3p4FYZ75Hwc3U0MuekUo1VZM"]
    assert t.turns[-1].tool_calls[0].arguments == (
        '{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}'
    )
    assert t.turns[0].text.startswith("I\u2019ll start by inspecting the repository layout")
    assert t.place(t.turns[0].index) == "line 1, trajectory.output[0]"
    assert t.turns[-1].usage is None  # trajectory.usage is the whole run's, not its last call's


def _rewritten(name: str, line: int, change: Any) -> bytes:
    rows = corpus(name)
    change(rows[line])
    return encoded(READER, rows)


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def change(row: Any) -> None:
        *to, last = path
        for key in to:
            row = row[key]
        row[last] = value

    return change


@pytest.mark.parametrize(
    ("name", "change", "reason"),
    [
        (  # an earlier transition that is not the start of the last: not the conversation so far
            "aviary.jsonl",
            _set(("response", "output", 0, 0, "content"), "another task"),
            "line 1, response.output[0][0]: differs from response.output[1][0]: the transitions "
            "are not cumulative, so the last is not the whole run",
        ),
        (
            "aviary.jsonl",
            _set(("response", "output", 1), {"role": "user", "content": "hi"}),
            "line 1, response.output[1]: is an item among transitions (lists)",
        ),
        (
            "aviary.jsonl",
            _set(("response", "contains_transitions"), False),
            "line 1, response.output[0]: is a list, not an item, and "
            "response.contains_transitions does not say the output is transitions",
        ),
        (  # verifiers resends an answer as an input message: compared by role and text
            "verifiers_wordle.jsonl",
            _set(("response", "output", 0, 2, "content", 0, "text"), "[slate]"),
            "line 1, response.output[0][2]: differs from response.output[1][2]: the transitions "
            "are not cumulative",
        ),
        (
            "deepswe_trajectory.jsonl",
            _set(("trajectory", "output"), {"items": []}),
            'line 1: "trajectory" has no "output" list',
        ),
        (
            "deepswe_trajectory.jsonl",
            _set(("trajectory", "output", 2), ["nested"]),
            "line 1, trajectory.output[2]: is a list, not an item",
        ),
    ],
)
def test_a_shape_read_wrongly_is_refused_with_its_place(
    name: str, change: Any, reason: str
) -> None:
    data = _rewritten(name, 0, change)
    rows = len(corpus(name))
    if rows == 1:  # the file's only rollout: the file is an error naming the line and why
        with pytest.raises(LoadError) as caught:
            read_bytes(data)
        assert caught.value.filename == "rollouts.jsonl"
        assert reason in caught.value.reason
        return
    found = read_bytes(data)
    assert [t.name for t in found] == [f"rollouts.{k}" for k in range(2, rows + 1)]
    [note] = [n for n in found[0].skipped if n.reason.startswith("left out")]
    assert note.where == "line 1" and reason in note.reason


def test_contains_transitions_over_items_is_refused() -> None:
    lines = rows("xlam_fc.jsonl")
    lines[0]["response"]["contains_transitions"] = True
    found = read(lines)
    [note] = [n for n in found[0].skipped if n.reason.startswith("left out")]
    assert "line 1, response.output[0]: is an item, but response.contains_transitions" in (
        note.reason
    )


def test_check_prints_each_rollouts_name_the_one_a_request_picks_it_by(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lc.jsonl"
    path.write_bytes((HERE / "blackjack.jsonl").read_bytes())
    assert check([path]) == 0
    firsts = [line for line in capsys.readouterr().out.splitlines() if line.startswith(str(path))]
    assert [line.split(": ")[1] for line in firsts] == [f"lc.{k}" for k in range(1, 6)]
    assert firsts[1] == f"{path}: lc.2: nemo-gym, 1 turns in 1 round, 0 tool calls"
    assert check([path], as_json=True) == 0
    assert [t["name"] for t in json.loads(capsys.readouterr().out)] == [
        f"lc.{k}" for k in range(1, 6)
    ]
