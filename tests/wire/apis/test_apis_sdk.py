"""The Responses API and the Anthropic Messages API, end to end with the official SDKs.

One trajectory, written in chat form, replays through all three APIs; one recorded through the
Anthropic API replays through chat completions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from proxy.formats import load_file
from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, anthropic_text, responses_text

TASK = "Count the files, then report."
RECORDED = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": TASK},
    {
        "role": "assistant",
        "content": "<think>list first</think>Listing.",
        "tool_calls": [
            {
                "id": "call_L1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            },
            {
                "id": "call_L2",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls -a"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_L1", "content": "a b"},
    {"role": "tool", "tool_call_id": "call_L2", "content": ". .. a b"},
    {"role": "user", "content": "Include hidden files."},
    {
        "role": "assistant",
        "content": "There are 2 files.",
        "tool_calls": [
            {
                "id": "call_W",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "wc -l"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_W", "content": "2"},
]
BASH_FLAT = {
    "type": "function",
    "name": "bash",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    "strict": False,
}
BASH_ANTHROPIC = {
    "name": "bash",
    "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
}


def status_of(url: str, session: str) -> dict[str, Any]:
    return httpx.get(url.removesuffix("/v1") + f"/replay/sessions/{session}").json()


# ---- Responses API


def responses_loop(c: openai.OpenAI, stream: bool) -> tuple[list[Any], list[dict[str, Any]]]:
    """Two scripted turns through responses.create / responses.stream; returns the outputs seen
    and the input list as it stands after them."""
    items: list[Any] = [{"role": "user", "content": TASK}]
    outputs = []
    for _ in range(2):
        if stream:
            with c.responses.stream(
                model="gpt-test", instructions="You are terse.", input=items, tools=[BASH_FLAT]
            ) as s:
                final = s.get_final_response()
        else:
            final = c.responses.create(
                model="gpt-test", instructions="You are terse.", input=items, tools=[BASH_FLAT]
            )
        outputs.append(final)
        for item in final.output:
            if item.type == "function_call":
                items.append(
                    {
                        "type": "function_call",
                        "call_id": item.call_id,
                        "name": item.name,
                        "arguments": item.arguments,
                        "id": item.id,
                    }
                )
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": item.call_id,
                        "output": f"ran {item.arguments}",
                    }
                )
            elif item.type == "message":
                items.append(
                    {
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": item.content[0].text}],
                    }
                )
            elif item.type == "reasoning":
                items.append(item.model_dump(exclude_none=True))
    return outputs, items


@pytest.mark.parametrize("stream", [False, True])
def test_responses_api_replays_a_chat_trajectory_then_goes_live(
    stream: bool,
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
) -> None:
    fake, upstream_url = upstream
    fake.then(responses_text("Done: 2 files."))
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = openai.OpenAI(
            base_url=url, api_key="k", max_retries=0, default_headers={"session-id": "codex-1"}
        )
        outputs, items = responses_loop(c, stream)
        first, second = outputs
        assert [(o.type, getattr(o, "call_id", None)) for o in first.output] == [
            ("reasoning", None),
            ("message", None),
            ("function_call", "call_L1"),
            ("function_call", "call_L2"),
        ]
        assert first.output_text == "Listing."
        assert first.output[0].summary[0].text == "list first"
        assert [o.arguments for o in first.output[2:]] == [
            '{"command": "ls"}',
            '{"command": "ls -a"}',
        ]
        assert second.output[-1].call_id == "call_W" and second.output_text == "There are 2 files."
        live = c.responses.create(
            model="gpt-test",
            instructions="You are terse.",
            input=items,
            tools=[BASH_FLAT],
            stream=False,
        )
        assert live.output_text == "Done: 2 files."
        status = status_of(url, "codex-1")
    assert status["turns_served"] == 2 and status["phase"] == "live"
    [sent] = fake.posts("/v1/responses")
    kinds = [(i.get("type", "message"), i.get("role")) for i in sent.json["input"]]
    hint = kinds.index(("message", "user"), 1)  # the spliced "Include hidden files." item
    assert sent.json["input"][hint]["content"][0]["text"] == "Include hidden files."
    assert kinds[hint + 1] == ("message", "assistant")  # right before the turn it preceded
    assert not any(
        i.get("type") == "reasoning" for i in sent.json["input"]
    )  # the proxy's own, taken out
    assert not any(str(i.get("id", "")).startswith("fc_rp1") for i in sent.json["input"])


def test_responses_raw_stream_is_the_sequence_a_real_server_sends(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    with proxy(trajectory=[write_trajectory(RECORDED)]) as url:
        c = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        events = list(
            c.responses.create(
                model="m", input=TASK, instructions="You are terse.", tools=[BASH_FLAT], stream=True
            )
        )
    kinds = [e.type for e in events]
    assert (
        kinds[:2] == ["response.created", "response.in_progress"]
        and kinds[-1] == "response.completed"
    )
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert (
        kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 4
    )
    assert (
        "response.function_call_arguments.delta" in kinds and "response.output_text.delta" in kinds
    )
    assert "response.reasoning_summary_text.delta" in kinds
    assert events[-1].response.usage is not None and len(events[-1].response.output) == 4
    assert len({e.response.id for e in events if hasattr(e, "response")}) == 1


def test_responses_tool_less_side_call_is_forwarded_and_takes_no_turn(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    fake.then(responses_text("A title"))
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = openai.OpenAI(
            base_url=url, api_key="k", max_retries=0, default_headers={"session-id": "oc-1"}
        )
        with c.responses.stream(
            model="small", input=[{"role": "user", "content": "title please"}]
        ) as s:
            assert s.get_final_response().output_text == "A title"
        first = c.responses.create(
            model="m", input=TASK, instructions="You are terse.", tools=[BASH_FLAT]
        )
        assert first.output[2].call_id == "call_L1"
    assert fake.posts("/v1/responses")[0].json["input"] == [
        {"role": "user", "content": "title please"}
    ]


# ---- Anthropic Messages API


def anthropic_loop(
    c: anthropic.Anthropic, stream: bool, thinking: bool
) -> tuple[list[Any], list[dict[str, Any]]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    extra: dict[str, Any] = (
        {"thinking": {"type": "enabled", "budget_tokens": 1024}} if thinking else {}
    )
    finals = []
    for _ in range(2):
        if stream:
            with c.messages.stream(
                model="claude-test",
                max_tokens=512,
                system="You are terse.",
                messages=messages,
                tools=[BASH_ANTHROPIC],
                **extra,
            ) as s:
                final = s.get_final_message()
        else:
            final = c.messages.create(
                model="claude-test",
                max_tokens=512,
                system="You are terse.",
                messages=messages,
                tools=[BASH_ANTHROPIC],
                **extra,
            )
        finals.append(final)
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in final.content],
            }
        )
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": f"ran {json.dumps(b.input)}"}
            for b in final.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})
    return finals, messages


@pytest.mark.parametrize(("stream", "thinking"), [(False, False), (True, True)])
def test_anthropic_api_replays_a_chat_trajectory_then_goes_live(
    stream: bool,
    thinking: bool,
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
) -> None:
    fake, upstream_url = upstream
    fake.then(anthropic_text("Done: 2 files."))
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        base = url.removesuffix("/v1")
        c = anthropic.Anthropic(
            base_url=base,
            api_key="sk-ant-k",
            max_retries=0,
            default_headers={"x-claude-code-session-id": "cc-1"},
        )
        finals, messages = anthropic_loop(c, stream, thinking)
        first, second = finals
        kinds = [b.type for b in first.content]
        assert kinds == (["thinking"] if thinking else []) + ["text", "tool_use", "tool_use"]
        tools = [b for b in first.content if b.type == "tool_use"]
        assert [(b.id, b.input) for b in tools] == [
            ("call_L1", {"command": "ls"}),
            ("call_L2", {"command": "ls -a"}),
        ]
        assert first.stop_reason == "tool_use" and second.content[-1].id == "call_W"
        if thinking:
            assert first.content[0].thinking == "list first" and first.content[0].signature
        live = c.messages.create(
            model="claude-test",
            max_tokens=512,
            system="You are terse.",
            messages=messages,
            tools=[BASH_ANTHROPIC],
        )
        assert live.content[0].text == "Done: 2 files."
        status = status_of(url, "cc-1")
    assert status["turns_served"] == 2 and status["tool_results"]["returned"] == 3
    [sent] = fake.posts("/v1/messages")
    sent_messages = sent.json["messages"]
    # the hint joins the user message of turn 1's results, right before turn 2
    assert sent_messages[2]["role"] == "user" and sent_messages[2]["content"][-1] == {
        "type": "text",
        "text": "Include hidden files.",
    }
    assert (
        sent_messages[3]["role"] == "assistant"
        and sent_messages[3]["content"][-1]["id"] == "call_W"
    )
    assert not any(
        b.get("type") == "thinking"
        for m in sent_messages
        for b in m["content"]
        if isinstance(b, dict)
    )
    # the client's own credentials are passed on (this SDK sends them as a Bearer token)
    assert "sk-ant-k" in (sent.headers.get("x-api-key", "") + sent.headers.get("authorization", ""))


def test_anthropic_title_call_and_query_string_and_errors(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    fake.then(anthropic_text('{"title": "Count files"}'))
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        base = url.removesuffix("/v1")
        headers = {"x-claude-code-session-id": "cc-2", "anthropic-version": "2023-06-01"}
        title = httpx.post(
            base + "/v1/messages?beta=true",
            json={
                "model": "m",
                "max_tokens": 50,
                "messages": [{"role": "user", "content": TASK}],
                "stream": True,
            },
            headers=headers,
        )
        assert title.headers["x-replay-source"] == "upstream" and "Count files" in title.text
        c = anthropic.Anthropic(
            base_url=base,
            api_key="k",
            max_retries=0,
            default_headers={"x-claude-code-session-id": "cc-2"},
        )
        first = c.messages.create(
            model="m",
            max_tokens=50,
            system="You are terse.",
            messages=[{"role": "user", "content": TASK}],
            tools=[BASH_ANTHROPIC],
        )
        assert first.content[-1].id == "call_L2"
        bad = [{"role": "user", "content": TASK}, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_other", "name": "bash", "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_other", "content": "x"}]}]  # fmt: skip
        with pytest.raises(anthropic.NotFoundError) as caught:
            c.messages.create(
                model="m",
                max_tokens=50,
                system="You are terse.",
                messages=bad,
                tools=[BASH_ANTHROPIC],
            )
        assert httpx.head(base + "/").status_code == 200
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert (
        "messages[1].content[0].id" in body["error"]["message"]
        and '"call_L1"' in body["error"]["message"]
    )


# ---- one model for all APIs


def test_a_run_recorded_through_anthropic_replays_through_chat_and_responses(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
    tmp_path: Path,
) -> None:
    with proxy(trajectory=[write_trajectory(RECORDED)], record_dir=tmp_path / "rec") as url:
        c = anthropic.Anthropic(
            base_url=url.removesuffix("/v1"),
            api_key="k",
            max_retries=0,
            default_headers={"x-claude-code-session-id": "cc-rec"},
        )
        anthropic_loop(c, stream=True, thinking=False)
    recording = load_file(tmp_path / "rec" / "cc-rec.jsonl")
    assert recording.format == "recording"
    assert [[c.id for c in t.tool_calls] for t in recording.turns] == [
        ["call_L1", "call_L2"],
        ["call_W"],
    ]
    assert recording.turns[1].users_before == ()  # the hint was never in this run's conversation
    with proxy(trajectory=[tmp_path / "rec" / "cc-rec.jsonl"]) as url:
        chat = openai.OpenAI(
            base_url=url,
            api_key="k",
            max_retries=0,
            default_headers={"x-session-affinity": "as-chat"},
        )
        tools = [
            {"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}
        ]
        answer = chat.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": TASK},
            ],
            tools=tools,
        )
        assert [t.id for t in answer.choices[0].message.tool_calls or []] == ["call_L1", "call_L2"]
        responses = openai.OpenAI(
            base_url=url, api_key="k", max_retries=0, default_headers={"session-id": "as-responses"}
        )
        out = responses.responses.create(
            model="m", input=TASK, instructions="You are terse.", tools=[BASH_FLAT]
        )
        assert [o.call_id for o in out.output if o.type == "function_call"] == [
            "call_L1",
            "call_L2",
        ]


def test_ids_anthropic_cannot_take_get_a_stable_stand_in(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    odd = [{"role": "user", "content": TASK}, {"role": "assistant", "tool_calls": [{"id": "functions.bash:0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
           {"role": "tool", "tool_call_id": "functions.bash:0", "content": "x"}, {"role": "assistant", "content": "ok"}]  # fmt: skip
    with proxy(trajectory=[write_trajectory(odd)]) as url:
        c = anthropic.Anthropic(
            base_url=url.removesuffix("/v1"),
            api_key="k",
            max_retries=0,
            default_headers={"x-claude-code-session-id": "odd"},
        )
        first = c.messages.create(
            model="m",
            max_tokens=9,
            messages=[{"role": "user", "content": TASK}],
            tools=[BASH_ANTHROPIC],
        )
        stand_in = first.content[0].id
        assert stand_in.startswith("toolu_") and stand_in != "functions.bash:0"
        history = [{"role": "user", "content": TASK}, {"role": "assistant", "content": [first.content[0].model_dump()]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": stand_in, "content": "x"}]}]  # fmt: skip
        second = c.messages.create(
            model="m", max_tokens=9, messages=history, tools=[BASH_ANTHROPIC]
        )
    assert second.content[0].text == "ok" and second.stop_reason == "end_turn"


def test_a_base_url_with_v1_given_to_the_anthropic_sdk_is_told_what_to_give(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    """The SDK adds /v1 itself: .../v1 as its base URL makes /v1/v1/messages, which is answered
    at once with the fix, in Anthropic's shape, not forwarded (and not retried)."""
    fake, upstream_url = upstream
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        c = anthropic.Anthropic(base_url=url, api_key="k")  # url ends in /v1; retries left on
        with pytest.raises(anthropic.NotFoundError) as caught:
            c.messages.create(
                model="m",
                max_tokens=50,
                messages=[{"role": "user", "content": TASK}],
                tools=[BASH_ANTHROPIC],
            )
        chat = httpx.post(url + "/v1/chat/completions", json={"model": "m", "messages": []})
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    message = body["error"]["message"]
    assert message.startswith("/v1/v1/messages: /v1 twice: the Anthropic SDK and Claude Code add")
    assert "(http://HOST:PORT, no /v1)" in message
    assert chat.status_code == 404 and "this client adds /v1" in chat.json()["error"]["message"]
    assert fake.requests == []  # nothing reached the upstream
