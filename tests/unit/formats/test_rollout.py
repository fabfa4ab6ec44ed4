"""One session, one rollout: every published NeMo-Gym rollout (tests/fixtures/corpus, and the
harness_logs fixtures) is read with its calls' token ids as an independent reading of the raw file
finds them, and written back as a NeMo-Gym line reads as the same run, in every field the reader
uses; the chat export keeps them too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.errors import LoadError
from proxy.formats import load_all, load_bytes, load_many
from proxy.formats.convert import to_messages
from proxy.formats.rollout import line, to_rollout
from proxy.replay.trajectory import Trajectory
from tests.conftest import ROOT
from tests.helpers.independent import nemo_gym_calls

PUBLISHED = sorted(
    p
    for p in [
        *(ROOT / "tests/fixtures/corpus/nemo-gym").glob("*.jsonl"),
        *(ROOT / "tests/fixtures/harness_logs/nemo-gym").glob("*.jsonl"),
    ]
    if "materialized_inputs" not in p.name  # task inputs, refused: no run to write
)


def as_read(t: Trajectory) -> Any:
    """Everything the reader makes of a run that replay uses."""
    return (
        t.system,
        t.task,
        [
            (
                u.number, u.text, u.reasoning,
                [(c.id, c.name, c.arguments, c.dispatch) for c in u.tool_calls],
                [x.content for x in u.users_before], [x.content for x in u.follow_up],
                u.round, u.usage, u.created, u.tokens, u.final,
            )
            for u in t.turns
        ],
        dict(t.tool_outputs),
        [x.content for x in t.trailing_users],
        t.text_based,
    )  # fmt: skip


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.name for p in PUBLISHED])
def test_each_calls_token_ids_are_read_as_the_file_records_them(path: Path) -> None:
    for trajectory, calls in zip(load_all(path), nemo_gym_calls(path), strict=True):
        assert len(trajectory.turns) == len(calls)
        for turn, call in zip(trajectory.turns, calls, strict=True):
            tokens = turn.tokens
            got = (
                None
                if tokens is None
                else {
                    "prompt_token_ids": tokens.prompt,
                    "generation_token_ids": tokens.generation,
                    "generation_log_probs": tokens.log_probs,
                }
            )
            assert got == call["tokens"], f"{trajectory.name} turn {turn.number}"


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.name for p in PUBLISHED])
def test_a_published_rollout_round_trips_through_the_export_unchanged(path: Path) -> None:
    for trajectory in load_all(path):
        [back] = load_many(line(trajectory), name="back", filename="back.jsonl")
        assert back.format == "nemo-gym"
        assert as_read(back) == as_read(trajectory)


def test_the_corpus_holds_rollouts_with_token_ids() -> None:
    """The round trip above is not vacuous: these files record ids and logprobs."""
    with_tokens = [p.name for p in PUBLISHED if any(u.tokens for t in load_all(p) for u in t.turns)]
    assert len(with_tokens) >= 5, with_tokens


@pytest.mark.parametrize("path", PUBLISHED, ids=[p.name for p in PUBLISHED])
def test_the_chat_export_keeps_each_calls_tokens(path: Path) -> None:
    for trajectory in load_all(path):
        back = load_bytes(orjson.dumps(to_messages(trajectory)), name="c", filename="c.json")
        assert [u.tokens for u in back.turns] == [u.tokens for u in trajectory.turns]


def test_the_usage_is_the_sum_of_the_calls_and_the_tokens_end_each_call() -> None:
    rows = [
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": "looking",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
            "prompt_token_ids": [1, 2],
            "generation_token_ids": [3, 4],
            "generation_log_probs": [-0.1, -0.2],
            "usage": {"prompt_tokens": 2, "completion_tokens": 2},
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {
            "role": "assistant",
            "content": "done",
            "prompt_token_ids": [1, 2, 3, 4, 5],
            "generation_token_ids": [6],
            "generation_log_probs": [-0.3],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        },
    ]
    rollout = to_rollout(load_bytes(orjson.dumps(rows), name="t", filename="t.json"))
    output = rollout["response"]["output"]
    assert [o["type"] for o in output] == [
        "message", "function_call", "function_call_output", "message",
    ]  # fmt: skip
    # on the first item of each call, which the reader tells the calls apart by
    assert output[0]["generation_token_ids"] == [3, 4]
    assert "generation_token_ids" not in output[1]
    assert output[3]["prompt_token_ids"] == [1, 2, 3, 4, 5]
    assert rollout["response"]["usage"] == {
        "input_tokens": 7,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 10,
    }


def call(text: str, name: str | None = None, **tokens: Any) -> dict[str, Any]:
    """An assistant message (with a call of `name`) and the token fields given."""
    message: dict[str, Any] = {"role": "assistant", "content": text, **tokens}
    if name is not None:
        message["tool_calls"] = [
            {"id": f"c_{name}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        ]
    return message


def ids(generated: int) -> dict[str, Any]:
    return {
        "prompt_token_ids": [1],
        "generation_token_ids": [generated],
        "generation_log_probs": [-0.1],
    }


@pytest.mark.parametrize(
    "calls",
    [
        # a text answer, then a call with text, nothing between (the second call's own)
        [call("first", **ids(2)), call("second", "ls", **ids(3)), call("done", **ids(4))],
        # without ids, a chat file marks a call of its own after a text answer itself
        [call("first"), call("second", "ls", generation_token_ids=[]), call("done")],
        [
            call("first", **ids(2)),
            call("second", "ls", generation_token_ids=[]),
            call("done", **ids(4)),
        ],
        [call("first"), call("second", "ls", **ids(3)), call("done")],
    ],
    ids=["all-with-ids", "none-with-ids", "first-and-last", "middle-only"],
)
def test_calls_that_follow_each_other_read_back_as_the_same_calls(
    calls: list[dict[str, Any]],
) -> None:
    rows = [{"role": "user", "content": "task"}, *calls]
    t = load_bytes(orjson.dumps(rows), name="t", filename="t.json")
    assert len(t.turns) == 3
    [back] = load_many(line(t), name="back", filename="back.jsonl")
    assert as_read(back) == as_read(t)


def test_a_call_whose_output_was_not_recorded_stays_apart_from_the_next() -> None:
    rows = [{"role": "user", "content": "task"}, call("", "ls"), call("done")]
    t = load_bytes(orjson.dumps(rows), name="t", filename="t.json")
    [back] = load_many(line(t), name="back", filename="back.jsonl")
    assert [(u.text, [c.name for c in u.tool_calls]) for u in back.turns] == [
        ("", ["ls"]),
        ("done", []),
    ]


def test_openai_logprobs_beside_nemo_gyms_ids_survive_both_exports() -> None:
    entries = [{"token": "hi", "logprob": -0.1, "bytes": None, "top_logprobs": []}]
    rows = [
        {"role": "user", "content": "task"},
        call("hi", **ids(2), logprobs={"content": entries}),
    ]
    t = load_bytes(orjson.dumps(rows), name="t", filename="t.json")
    tokens = t.turns[0].tokens
    assert tokens is not None and tokens.entries == entries
    [back] = load_many(line(t), name="back", filename="back.jsonl")
    chat = load_bytes(orjson.dumps(to_messages(t)), name="c", filename="c.json")
    assert back.turns[0].tokens == chat.turns[0].tokens == tokens


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        (
            {"generation_token_ids": [3, 4], "generation_log_probs": [-0.1]},
            "generation_token_ids has 2 ids but generation_log_probs has 1 values",
        ),
        ({"generation_token_ids": [3, "4"]}, "generation_token_ids[1] must be a token id"),
        ({"generation_token_ids": "3 4"}, "generation_token_ids must be a list of token ids"),
        ({"generation_log_probs": [-0.1]}, "generation_log_probs without generation_token_ids"),
        (
            {"prompt_token_ids": [1], "generation_token_ids": [2], "generation_log_probs": ["x"]},
            "generation_log_probs[0] must be a number",
        ),
    ],
)
def test_token_fields_that_cannot_be_a_calls_fail_loudly_with_their_place(
    fields: dict[str, Any], said: str
) -> None:
    row = {
        "responses_create_params": {"input": [{"role": "user", "content": "task"}]},
        "response": {
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "hi"}],
                    **fields,
                }
            ]
        },
    }
    with pytest.raises(LoadError) as caught:
        load_many(json.dumps(row).encode(), name="bad", filename="bad.jsonl")
    assert said in str(caught.value)
    assert "line 1, response.output[0]" in str(caught.value)
