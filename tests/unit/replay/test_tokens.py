"""proxy.replay.tokens: which fields are a call's tokens, and the renderers put them back where
the recording had them (read back by the same code that reads a recording)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.apis import CHAT, chat, responses
from proxy.replay.tokens import Tokens, read_tokens, without_tokens
from proxy.replay.trajectory import ToolCall, Trajectory, Turn

ENTRIES = [
    {"token": "Hi", "logprob": -0.5, "bytes": [72, 105], "top_logprobs": []},
    {"token": "!", "logprob": -0.25, "bytes": [33], "top_logprobs": []},
]
STYLES = {
    "nemo-gym": Tokens("nemo-gym", [1, 2], [3, 4], [-0.5, -0.25]),
    "vllm": Tokens("vllm", [1, 2], [3, 4], None, ENTRIES),
    "openai": Tokens("openai", entries=ENTRIES),
}


def turn(tokens: Tokens | None, calls: bool = False) -> Turn:
    called = (ToolCall("call_1", "ls", "{}"),) if calls else ()
    return Turn(1, 0, "Hi!", None, called, tokens=tokens)


def test_the_three_families_are_told_apart() -> None:
    nemo = read_tokens({"prompt_token_ids": [1], "generation_token_ids": [2],
                        "generation_log_probs": [-1.0], "routed_experts": "nrlre1:x"})  # fmt: skip
    assert nemo == Tokens("nemo-gym", [1], [2], [-1.0], None, "nrlre1:x")
    vllm = read_tokens({"prompt_token_ids": [1], "token_ids": [2], "logprobs": {"content": []}})
    assert vllm == Tokens("vllm", [1], [2])
    assert read_tokens({"logprobs": {"content": ENTRIES}}) == Tokens("openai", entries=ENTRIES)
    assert read_tokens({"logprobs": ENTRIES}) == Tokens("openai", entries=ENTRIES)  # Responses'


@pytest.mark.parametrize(
    "message",
    [
        {"content": "hi"},
        {"generation_token_ids": []},  # the chat export's mark of a model call of its own
        {"token_ids": None, "logprobs": None},  # vLLM's when not asked for
    ],
)
def test_a_message_without_tokens_has_none(message: dict[str, Any]) -> None:
    assert read_tokens(message) is None


def test_the_mark_beside_vllms_fields_is_still_the_mark() -> None:
    message = {"generation_token_ids": [], "prompt_token_ids": [1], "token_ids": [2]}
    assert read_tokens(message) == Tokens("vllm", [1], [2])


def test_the_handoff_prefix_is_the_last_held_calls_prompt_and_generation() -> None:
    turns = (turn(Tokens("nemo-gym", [1, 2], [3], [-1.0])), turn(None))
    t = Trajectory("t", "t.json", "chat", "d", "task", None, turns)
    assert t.prefix_tokens(1) == [1, 2, 3]
    assert t.prefix_tokens(2) is None  # that call recorded none
    assert t.prefix_tokens(0) is None and t.prefix_tokens(3) is None
    only_logprobs = (turn(Tokens("openai", entries=ENTRIES)),)
    assert (
        Trajectory("o", "o.json", "chat", "d", "task", None, only_logprobs).prefix_tokens(1) is None
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("style", sorted(STYLES))
def test_chat_serves_each_family_in_its_own_fields_and_reads_it_back(
    style: str, stream: bool
) -> None:
    tokens = STYLES[style]
    if stream:
        raw = b"".join(chat.chat_stream(
            turn(tokens), model="m", completion_id="c", created=1, include_usage=False
        ))  # fmt: skip
    else:
        raw = chat.chat_completion(turn(tokens), model="m", completion_id="c", created=1)
    if not stream:
        body = orjson.loads(raw)
        choice, message = body["choices"][0], body["choices"][0]["message"]
        if style == "nemo-gym":  # NeMo-Gym's Chat Completions message
            assert message["generation_token_ids"] == [3, 4] and "token_ids" not in choice
        if style == "vllm":  # vLLM's: the prompt on the body, the generation on the choice
            assert (body["prompt_token_ids"], choice["token_ids"]) == ([1, 2], [3, 4])
            assert "prompt_token_ids" not in message
        if style != "nemo-gym":
            assert choice["logprobs"]["content"] == ENTRIES
    message = chat.read_answer(raw, stream=stream).message
    assert message is not None and read_tokens(message) == tokens


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("calls", [False, True], ids=["text", "call"])
def test_responses_put_the_tokens_on_the_item_that_ends_the_call(stream: bool, calls: bool) -> None:
    served = turn(STYLES["vllm"], calls)
    if stream:
        raw = b"".join(responses.response_events(served, {}, key="k", created=1))
    else:
        raw = responses.response_object(served, {}, key="k", created=1)
    assembled = responses.read_answer(raw, stream=stream)
    assert assembled.native is not None
    output = assembled.native["output"]
    assert [o["type"] for o in output] == ["message", *(["function_call"] if calls else [])]
    assert output[-1]["generation_token_ids"] == [3, 4]
    assert output[-1]["generation_log_probs"] == [-0.5, -0.25]  # from the logprob entries
    assert all("generation_token_ids" not in o for o in output[:-1])
    assert output[0]["content"][0]["logprobs"] == ENTRIES
    message = assembled.message
    assert message is not None
    got = read_tokens(message)
    assert got is not None and (got.prompt, got.generation) == ([1, 2], [3, 4])
    assert got.entries == ENTRIES


def test_a_turn_without_tokens_is_served_as_before() -> None:
    body = orjson.loads(chat.chat_completion(turn(None), model="m", completion_id="c", created=1))
    assert set(body) == {"id", "object", "created", "model", "choices", "usage"}
    assert body["choices"][0]["logprobs"] is None
    item = orjson.loads(responses.response_object(turn(None), {}, key="k", created=1))["output"][0]
    assert "generation_token_ids" not in item and item["content"][0]["logprobs"] == []


def test_token_fields_are_taken_off_every_entry_and_nothing_else() -> None:
    history = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "a", "prompt_token_ids": [1], "token_ids": [2]},
        {"type": "function_call", "call_id": "c", "generation_token_ids": [3],
         "generation_log_probs": [-1.0], "routed_experts": "x"},
    ]  # fmt: skip
    out = without_tokens(history)
    assert out == [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": "a"},
        {"type": "function_call", "call_id": "c"},
    ]
    assert out[0] is history[0]  # entries without any are not copied
    assert without_tokens([{"role": "user", "content": "hi"}]) is None


def test_litellms_copy_of_them_is_taken_off_too() -> None:
    """mini-swe-agent sends back what LiteLLM kept of a message's unknown fields."""
    extra = {"generation_token_ids": [3], "prompt_token_ids": [1], "refusal": None}
    history = [{"role": "assistant", "content": "a", "provider_specific_fields": extra}]
    assert without_tokens(history) == [
        {"role": "assistant", "content": "a", "provider_specific_fields": {"refusal": None}}
    ]
    only = [{"role": "assistant", "content": "a", "provider_specific_fields": {"token_ids": [2]}}]
    assert without_tokens(only) == [{"role": "assistant", "content": "a"}]


@pytest.mark.parametrize("tokens", [True, False])
def test_a_live_body_keeps_or_loses_them_as_the_upstream_takes_them(tokens: bool) -> None:
    body = {"model": "m", "messages": [{"role": "assistant", "content": "a",
                                        "generation_token_ids": [3], "prompt_token_ids": [1]}]}  # fmt: skip
    live, _ = CHAT.live(body, (), tokens=tokens)
    if tokens:
        assert live is None  # the body goes as it came
    else:
        assert live == {"model": "m", "messages": [{"role": "assistant", "content": "a"}]}
