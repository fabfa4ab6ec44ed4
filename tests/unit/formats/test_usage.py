"""The usage each reader keeps with a turn, checked against the published files read on their own
(NeMo-Gym's rollouts, a Claude Code transcript, a Codex rollout), and the shapes it is read in."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from proxy.apis import BY_NAME, usage_in
from proxy.errors import LoadError
from proxy.formats import load_all
from proxy.formats.harness_logs.codex import token_counts
from proxy.formats.harness_logs.opencode import step_tokens
from proxy.replay.trajectory import ToolCall, Turn, Usage
from proxy.replay.usage import stable_time, usage_for
from tests.conftest import ROOT

CORPUS = ROOT / "tests/fixtures/corpus"
LOGS = ROOT / "tests/fixtures/harness_logs"


@pytest.mark.parametrize(
    ("name", "shape", "usage"),
    [
        (  # Chat Completions
            "chat",
            {
                "prompt_tokens": 100,
                "completion_tokens": 20,
                "prompt_tokens_details": {"cached_tokens": 60},
                "completion_tokens_details": {"reasoning_tokens": 5},
            },
            Usage(100, 20, 60, 0, 5),
        ),
        (  # Responses
            "responses",
            {
                "input_tokens": 2940,
                "input_tokens_details": {"cached_tokens": 2688},
                "output_tokens": 8,
                "output_tokens_details": {"reasoning_tokens": 0},
            },
            Usage(2940, 8, 2688),
        ),
        (  # Anthropic: the input it counts leaves out what the cache read and wrote
            "anthropic",
            {
                "input_tokens": 10,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 500,
                "output_tokens": 7,
            },
            Usage(2510, 7, 2000, 500),
        ),
        (  # Gemini: thoughts are apart from the candidates
            "gemini",
            {
                "promptTokenCount": 50,
                "candidatesTokenCount": 10,
                "thoughtsTokenCount": 4,
                "cachedContentTokenCount": 20,
            },
            Usage(50, 14, 20, 0, 4),
        ),
    ],
)
def test_usage_is_read_in_every_apis_shape(name: str, shape: dict[str, Any], usage: Usage) -> None:
    assert usage_in(shape) == usage
    assert BY_NAME[name].read_usage(shape) == usage  # its own API's row reads it


def test_an_answers_usage_is_read_by_its_apis_row_first() -> None:
    """A recording says which API answered: its row reads the usage, whatever the others would
    make of it; a Messages API usage without its cache fields still reads (by the names it shares
    with the Responses API)."""
    shape = {"input_tokens": 10, "output_tokens": 7}
    assert BY_NAME["anthropic"].read_usage(shape) is None
    assert usage_in(shape, BY_NAME["anthropic"]) == Usage(10, 7)
    assert usage_in({"prompt_tokens": 3}, BY_NAME["gemini"]) == Usage(3, 0)


def test_the_harness_logs_own_counts_are_read_by_their_readers() -> None:
    codex = {
        "input_tokens": 5,
        "cached_input_tokens": 2,
        "cache_write_input_tokens": 1,
        "output_tokens": 7,
        "reasoning_output_tokens": 3,
    }
    assert token_counts(codex) == Usage(5, 7, 2, 1, 3)
    assert token_counts({"total_tokens": 3}) is None
    opencode = {"input": 5, "output": 7, "reasoning": 3, "cache": {"read": 2, "write": 1}}
    assert step_tokens(opencode) == Usage(8, 10, 2, 1, 3)
    assert step_tokens({"input": 5}) is None


def test_what_is_no_usage_is_none() -> None:
    assert usage_in(None) is None and usage_in({"total": 3}) is None and usage_in([1]) is None
    assert usage_in({"input_tokens": -4, "output_tokens": "7"}) == Usage(0, 0)


def test_an_estimate_is_about_four_characters_a_token_and_says_so() -> None:
    turn = Turn(1, 0, "abcde", "think", (ToolCall("c", "bash", '{"a":1}'),))
    assert usage_for(turn, 401) == Usage(101, 6, reasoning=2, estimated=True)  # 5+5+4+7 = 21
    recorded = Usage(9, 8)
    turn.usage = recorded
    assert usage_for(turn, 401) is recorded


def test_a_stable_time_is_the_same_for_a_turn_and_another_for_another() -> None:
    assert (
        stable_time("replay-abc", 1) == stable_time("replay-abc", 1) != stable_time("replay-abc", 2)
    )
    assert 1_698_796_800 <= stable_time("replay-abc", 1) < 1_698_796_800 + 2_000_000


def test_made_up_times_go_up_turn_by_turn() -> None:
    """A client that orders answers by `created` (or a trainer reading a replayed run) sees the
    turns in the order they were served."""
    for script in ("replay-abc", "replay-0123456789ab", "replay-none"):
        times = [stable_time(script, turn) for turn in range(1, 200)]
        assert times == sorted(times) and len(set(times)) == len(times)


@pytest.mark.parametrize("name", ["customer_service_env", "tictactoe_env", "scicode"])
def test_a_nemo_gym_rollouts_usage_is_its_last_model_calls(name: str) -> None:
    """NeMo-Gym's simple agent returns the last model response with the whole output put in it
    (responses_api_agents/simple_agent/app.py), so response.usage is the last call's."""
    path = CORPUS / "nemo-gym" / f"{name}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    trajectories = load_all(path)
    assert len(trajectories) == len(rows)
    for t, row in zip(trajectories, rows, strict=True):
        response = row["response"]
        given = response["usage"]
        *earlier, last = t.turns
        assert last.usage == Usage(
            given["input_tokens"],
            given["output_tokens"],
            given["input_tokens_details"]["cached_tokens"],
            0,
            given["output_tokens_details"]["reasoning_tokens"],
        )
        assert last.created == int(response["created_at"])
        assert all(turn.usage is None for turn in earlier)


def test_a_claude_code_turn_has_its_messages_last_usage_and_first_time() -> None:
    path = LOGS / "claude-code" / "session.jsonl"
    usages: dict[str, Any] = {}
    times: dict[str, str] = {}
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") or {}
        if entry.get("type") == "assistant" and isinstance(message.get("usage"), dict):
            usages[message["id"]] = message["usage"]  # each line repeats it: the last is whole
            times.setdefault(message["id"], entry["timestamp"])
    [t] = load_all(path)
    expected = [usage_in(u) for u in usages.values()]
    assert [turn.usage for turn in t.turns] == expected[: len(t.turns)]
    assert all(turn.created is not None for turn in t.turns)


def test_a_codex_turn_has_the_usage_its_response_was_recorded_with() -> None:
    """Each token_usage_record closes a model response: its usage is that of the response's
    first item's turn (a response the reader leaves out, such as an answer right after a final
    one, has no turn to carry it)."""
    path = LOGS / "codex" / "rollout.jsonl"
    recorded: dict[int, Any] = {}
    start = None
    for index, line in enumerate(path.read_text().splitlines()):
        entry = json.loads(line)
        payload = entry.get("payload") or {}
        side = payload.get("type") in ("reasoning", "function_call", "custom_tool_call") or (
            payload.get("type") == "message" and payload.get("role") == "assistant"
        )
        if entry["type"] == "response_item" and side and start is None:
            start = index
        if entry["type"] == "token_usage_record":
            recorded[start] = token_counts(payload["usage"])
            start = None
    [t] = load_all(path)
    assert len(t.turns) == 7 and len(recorded) == 8
    assert [turn.usage for turn in t.turns] == [recorded[turn.index] for turn in t.turns]


def test_a_chat_trajectory_may_say_an_answers_usage_itself(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    usage = {"prompt_tokens": 12, "completion_tokens": 3}
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello", "usage": usage, "created": 1700000123},
            ]
        )
    )
    [t] = load_all(path)
    assert t.turns[0].usage == Usage(12, 3) and t.turns[0].created == 1700000123


def test_a_mini_swe_agent_turn_has_the_usage_of_the_completion_it_kept() -> None:
    path = CORPUS / "mini-swe-agent" / "astropy__astropy-12907.traj.json"
    messages = json.loads(path.read_text())["messages"]
    [t] = load_all(path)
    assert t.turns
    for turn in t.turns:
        response = messages[turn.index]["extra"]["response"]
        assert turn.usage == usage_in(response["usage"]) and turn.usage is not None
        assert turn.created == response["created"]
    assert t.turns[0].usage == Usage(1689, 76, 1664)


def test_a_served_turn_is_the_turn_with_its_usage_and_time_settled() -> None:
    from dataclasses import fields

    from proxy.replay.trajectory import UserMessage

    turn = Turn(3, 7, "t", "r", (ToolCall("c", "n", "{}"),), (UserMessage(1, "u"),), None, 2)
    served = turn.served(Usage(1, 2), 99)
    for field in fields(Turn):  # a field added to Turn and left out of served() fails here
        if field.name not in ("usage", "created"):
            assert getattr(served, field.name) == getattr(turn, field.name), field.name
    assert (served.usage, served.created, turn.usage, turn.created) == (Usage(1, 2), 99, None, None)


def test_an_openhands_v0_turn_has_the_usage_of_its_model_response() -> None:
    path = LOGS / "openhands" / "v0-basic_interactions.json"
    responses = [
        e["tool_call_metadata"]["model_response"]
        for e in json.loads(path.read_text())
        if isinstance(e, dict) and (e.get("tool_call_metadata") or {}).get("model_response")
    ]
    [t] = load_all(path)
    calling = [turn for turn in t.turns if turn.tool_calls]
    assert len(calling) == len(responses) == 1
    assert calling[0].usage == usage_in(responses[0]["usage"]) == Usage(2473, 10, 2304)
    assert calling[0].created == responses[0]["created"]


def test_an_opencode_turn_has_its_steps_tokens() -> None:
    """opencode's step-finish tokens count input without the cache's, and output without the
    reasoning (opencode's session getUsage): both are put back."""
    assert step_tokens(
        {"input": 10, "output": 5, "reasoning": 2, "cache": {"read": 100, "write": 20}}
    ) == Usage(130, 7, 100, 20, 2)
    path = LOGS / "opencode" / "session.json"
    doc = json.loads(path.read_text())
    steps = [
        part["tokens"]
        for message in doc["messages"]
        for part in message["parts"]
        if part.get("type") == "step-finish"
    ]
    [t] = load_all(path)
    assert [turn.usage for turn in t.turns] == [step_tokens(s) for s in steps][: len(t.turns)]
    assert all(turn.usage is not None for turn in t.turns)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("usage", {"prompt_tokens": 2**64 - 1, "completion_tokens": 2**64 - 1}, "a token count"),
        ("usage", {"prompt_tokens": 2**64, "completion_tokens": 3}, "a token count"),
        ("usage", {"input_tokens": 1, "cache_read_input_tokens": 2**63}, "a token count"),
        ("usage", {"promptTokenCount": 1e300}, "a token count"),
        ("created", 2**64, "the time it was made (created)"),
        ("created", 1e300, "the time it was made (created)"),
    ],
)
def test_a_number_no_run_records_is_a_load_error_naming_its_place(
    tmp_path: Path, field: str, value: Any, says: str
) -> None:
    """2^64 tokens used to load, then make every answer of the turn a 500 (orjson writes
    integers of 64 bits at most, and sums went past them)."""
    path = tmp_path / "run.json"
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", field: value},
    ]
    path.write_text(json.dumps(messages))
    with pytest.raises(LoadError, match=rf"{path}:1: {re.escape(says)} is .*out of range") as error:
        load_all(path)
    assert error.value.index == 1


def test_the_largest_exact_count_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    usage = {"prompt_tokens": 2**53 - 1, "completion_tokens": 0}
    path.write_text(json.dumps([{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": "x", "usage": usage}]))  # fmt: skip
    [t] = load_all(path)
    assert t.turns[0].usage == Usage(2**53 - 1, 0)


def _exchange(**change: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    answer = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
              "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
              "usage": {"prompt_tokens": 1, "completion_tokens": 1}}  # fmt: skip
    return {
        "type": "exchange", "v": 1, "session": "s", "lane": "main", "api": "chat",
        "method": "POST", "path": "/v1/chat/completions", "source": "upstream",
        "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        "status": 200, "stream": False, "content_type": "application/json",
        "response": answer, "message": message, "finish_reason": "tool_calls",
        "started": 1_700_000_000.0, **change,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (
            [_exchange(response={**_exchange()["response"], "usage": {"prompt_tokens": 2**64}})],
            ":0: a token count is",
        ),
        ([_exchange(started=1e300)], ":0: the time it was made (created) is"),
        ([_exchange(), _exchange(lane="toolless", status=2**64 - 1)], ":1: status is 1844"),
        ([_exchange(), _exchange(lane="toolless", status=-5)], ":1: status is -5"),
    ],
)
def test_a_recording_with_a_number_no_answer_has_is_a_load_error(
    tmp_path: Path, lines: list[dict[str, Any]], says: str
) -> None:
    """A recorded side answer with status 2^64 - 1 would have been served with it: a 500."""
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(LoadError, match=re.escape(f"{path}{says}")):
        load_all(path)
