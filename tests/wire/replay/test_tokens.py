"""A prefix a trainer can use: recorded token ids and logprobs come back with replayed turns, live
turns keep the ones their upstream returned, and a session exports as one NeMo-Gym rollout line.

The script is a published NeMo-Gym rollout (tests/fixtures/corpus/nemo-gym/customer_service_env:
ten model calls, each with its `prompt_token_ids`, `generation_token_ids` and
`generation_log_probs`). The clients are the official openai SDK over real sockets; the live
model is a stand-in that answers as vLLM does with `return_token_ids` and logprobs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest
from starlette.responses import Response

from proxy.formats import load_many
from tests.conftest import ROOT, ProxyFactory
from tests.helpers.servers import FakeUpstream, running, vllm_text
from tests.wire.formats import test_published_rollouts as tau2

ROLLOUT = ROOT / "tests/fixtures/corpus/nemo-gym/customer_service_env.jsonl"
ROW = json.loads(ROLLOUT.read_text())
PROMPT = [
    {"role": i["role"], "content": i["content"]} for i in ROW["responses_create_params"]["input"]
]
CALLS = ROW["response"]["output"]  # one assistant message item per model call, tokens on it
FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
AGAIN = "Please say it again."  # the environment's next message, which the rollout did not keep
# the live call's tokens, as the stand-in vLLM returns them
LIVE_PROMPT, LIVE_IDS, LIVE_LOGPROBS = [7, 8, 9, 10], [501, 502, 503], [-0.5, -0.25, -0.125]


def recorded(k: int) -> dict[str, Any]:
    """Call k's (0-based) recorded token fields."""
    return {f: CALLS[k][f] for f in FIELDS}


def folder_with_rollout(tmp_path: Path) -> Path:
    folder = tmp_path / "rollouts"
    folder.mkdir()
    shutil.copy(ROLLOUT, folder / "cs.jsonl")
    return folder


def client(url: str, session: str) -> openai.OpenAI:
    headers = {"x-replay-trajectory": "cs.1", "x-session-affinity": session}
    return openai.OpenAI(base_url=url, api_key="sk", max_retries=0, default_headers=headers)


def chat_call(c: openai.OpenAI, messages: list[Any], stream: bool) -> tuple[str, dict[str, Any]]:
    """One Chat Completions call: the answer's text and the token fields it carried (and the
    usage it reported, as "usage": (prompt, completion))."""
    if not stream:
        reply = c.chat.completions.create(model="m", messages=messages)
        message = reply.choices[0].message
        extra = {**(message.model_extra or {}), **(reply.model_extra or {})}
        extra.update(reply.choices[0].model_extra or {})
        if reply.choices[0].logprobs is not None:
            extra["logprobs"] = reply.choices[0].logprobs.model_dump()
        assert reply.usage is not None
        extra["usage"] = (reply.usage.prompt_tokens, reply.usage.completion_tokens)
        return message.content or "", extra
    text, extra = "", {}
    chunks = c.chat.completions.create(
        model="m", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    for chunk in chunks:
        if chunk.usage is not None:
            extra["usage"] = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        extra.update({k: v for k, v in (chunk.model_extra or {}).items() if v is not None})
        for choice in chunk.choices:
            text += choice.delta.content or ""
            extra.update({k: v for k, v in (choice.delta.model_extra or {}).items()})
            extra.update({k: v for k, v in (choice.model_extra or {}).items() if v is not None})
    return text, extra


def responses_call(
    c: openai.OpenAI, history: list[Any], stream: bool
) -> tuple[str, dict[str, Any]]:
    """One Responses call: the answer's text and the token fields on the item that ends it."""
    if stream:
        with c.responses.stream(model="m", input=history) as events:
            answer = events.get_final_response()
    else:
        answer = c.responses.create(model="m", input=history)
    [item] = answer.output
    return answer.output_text, dict(item.model_extra or {})


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_published_rollout_replays_with_each_calls_recorded_token_ids_and_logprobs(
    proxy: ProxyFactory, tmp_path: Path, api: str, stream: bool
) -> None:
    with proxy(trajectory_dir=folder_with_rollout(tmp_path)) as url:
        c = client(url, f"tokens-{api}-{stream}")
        history: list[Any] = list(PROMPT)
        for k in range(len(CALLS)):
            call = chat_call if api == "chat" else responses_call
            text, extra = call(c, history, stream)
            assert text == CALLS[k]["content"][0]["text"]
            # NeMo-Gym's own fields, as its Chat Completions message and its rollout items hold
            assert {f: extra.get(f) for f in FIELDS} == recorded(k), f"call {k + 1}"
            history += [{"role": "assistant", "content": text}, {"role": "user", "content": AGAIN}]


def test_a_turn_that_recorded_no_tokens_carries_none(proxy: ProxyFactory, tmp_path: Path) -> None:
    """tau2's published rollout records none: nothing is made up."""
    folder = tmp_path / "rollouts"
    folder.mkdir()
    shutil.copy(tau2.ROLLOUT, folder / "tau2.jsonl")
    headers = {"x-replay-trajectory": "tau2.1", "x-session-affinity": "no-tokens"}
    body = {
        "model": "m",
        "messages": [{"role": i["role"], "content": tau2.text(i)} for i in tau2.PROMPT],
        "tools": [
            {"type": "function", "function": {"name": n, "parameters": {}}} for n in tau2.TOOLS
        ],
    }
    with proxy(trajectory_dir=folder) as url:
        raw = httpx.post(f"{url}/chat/completions", json=body, headers=headers).json()
    assert raw["choices"][0]["message"]["tool_calls"]
    assert not set(json.dumps(raw).split('"')) & {*FIELDS, "token_ids"}
    assert raw["choices"][0]["logprobs"] is None


def live_session(
    proxy: ProxyFactory, tmp_path: Path, stream: bool, **settings: Any
) -> tuple[str, FakeUpstream, Path, Any]:
    """Two replayed calls and a live one, recorded: (the admin's rollout line, the upstream,
    the recordings folder, (the answers' texts, the usage each reported))."""
    fake = FakeUpstream().then(vllm_text("Live answer.", LIVE_PROMPT, LIVE_IDS, LIVE_LOGPROBS))
    records = tmp_path / "records"
    with (
        running(fake.app) as upstream,
        proxy(
            upstream=upstream + "/v1",
            trajectory_dir=folder_with_rollout(tmp_path),
            record_dir=records,
            replay_turns=2,
            **settings,
        ) as url,
    ):
        c = client(url, "rl-1")
        history: list[Any] = list(PROMPT)
        texts, usages = [], []
        for _ in range(3):
            text, extra = chat_call(c, history, stream)
            texts.append(text)
            usages.append(extra.get("usage"))
            history += [{"role": "assistant", "content": text}, {"role": "user", "content": AGAIN}]
        line = httpx.get(url.removesuffix("/v1") + "/replay/sessions/rl-1/rollout")
        assert line.status_code == 200, line.text
    return line.text, fake, records, (texts, usages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_two_replayed_calls_and_a_live_one_export_as_one_rollout_with_every_calls_tokens(
    proxy: ProxyFactory, tmp_path: Path, stream: bool
) -> None:
    line, fake, records, (texts, usages) = live_session(proxy, tmp_path, stream)
    assert texts[2] == "Live answer." and len(fake.posts()) == 1
    assert usages[2] == (len(LIVE_PROMPT), len(LIVE_IDS))  # the upstream's own
    rollout = json.loads(line)
    calls = [o for o in rollout["response"]["output"] if o.get("role") == "assistant"]
    assert [{f: c.get(f) for f in FIELDS} for c in calls] == [
        recorded(0),
        recorded(1),
        dict(zip(FIELDS, [LIVE_PROMPT, LIVE_IDS, LIVE_LOGPROBS], strict=True)),
    ]
    # the environment's messages between the calls, as the harness sent them
    users = [o["content"] for o in rollout["response"]["output"] if o.get("role") == "user"]
    assert users == [AGAIN, AGAIN]
    assert rollout["responses_create_params"]["input"] == [{**m, "type": "message"} for m in PROMPT]
    # the usage the rollout would have recorded: what every call reported, added up
    usage = rollout["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (
        sum(u[0] for u in usages),
        sum(u[1] for u in usages),
    )
    # NeMo-Gym's reader loads it back as the same three calls
    [back] = load_many(line.encode(), name="rl", filename="rl.jsonl")
    assert [t.text for t in back.turns] == texts
    assert [(t.tokens.prompt, t.tokens.generation, t.tokens.generation_log_probs())
            for t in back.turns if t.tokens] == [
        (recorded(0)[FIELDS[0]], recorded(0)[FIELDS[1]], recorded(0)[FIELDS[2]]),
        (recorded(1)[FIELDS[0]], recorded(1)[FIELDS[1]], recorded(1)[FIELDS[2]]),
        (LIVE_PROMPT, LIVE_IDS, LIVE_LOGPROBS),
    ]  # fmt: skip
    # the recording keeps the live answer's token fields as vLLM returned them
    [recording] = records.iterdir()
    live = [json.loads(x) for x in recording.read_text().splitlines()][-1]
    assert live["source"] == "upstream"
    assert (live["message"]["prompt_token_ids"], live["message"]["token_ids"]) == (
        LIVE_PROMPT,
        LIVE_IDS,
    )
    # and convert writes the same line from the recording file
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "proxy", "convert", "--to", "nemo-gym", str(recording), "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == rollout


@pytest.mark.parametrize("offload_bytes", [0, 100], ids=["read-here", "read-in-a-worker"])
def test_the_handoff_sends_the_replayed_prefixs_token_ids_once(
    proxy: ProxyFactory, tmp_path: Path, offload_bytes: int
) -> None:
    _, fake, records, _ = live_session(
        proxy, tmp_path, False, handoff_tokens=True, offload_bytes=offload_bytes
    )
    [first] = fake.posts()
    call = recorded(1)  # the last replayed call: its prompt, then what it generated
    expected = call["prompt_token_ids"] + call["generation_token_ids"]
    assert first.json["required_prefix_token_ids"] == expected
    # the rest of the body is the harness's, unchanged
    sent = {k: v for k, v in first.json.items() if k != "required_prefix_token_ids"}
    assert [m["content"] for m in sent["messages"]][-1] == AGAIN
    assert set(sent) == {"model", "messages"}
    # the recording keeps what the client sent as its request, and what went upstream
    [recording] = records.iterdir()
    live = [json.loads(x) for x in recording.read_text().splitlines()][-1]
    assert "required_prefix_token_ids" not in live["request"]
    assert live["forwarded"]["required_prefix_token_ids"] == expected


def test_without_the_option_the_live_call_carries_no_prefix(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    _, fake, _, _ = live_session(proxy, tmp_path, False)
    [first] = fake.posts()
    assert "required_prefix_token_ids" not in first.json


def test_a_rollout_asked_of_a_proxy_that_records_nothing_says_how_to_get_one(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    with proxy(trajectory_dir=folder_with_rollout(tmp_path)) as url:
        answer = httpx.get(url.removesuffix("/v1") + "/replay/sessions/rl-1/rollout")
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "session_not_recorded" and "--record-dir" in error["message"]


def test_a_rollout_of_a_session_never_recorded_is_not_found(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    with proxy(record_dir=tmp_path / "records") as url:
        answer = httpx.get(url.removesuffix("/v1") + "/replay/sessions/nobody/rollout")
    assert answer.status_code == 404
    assert "no recording of session 'nobody'" in answer.json()["error"]["message"]


def test_over_the_anthropic_api_no_tokens_are_served_but_the_export_keeps_them(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    """The Messages API has no place for token ids: the answers carry none, and the session's
    rollout still holds each replayed call's, from the script."""
    with proxy(trajectory_dir=folder_with_rollout(tmp_path), record_dir=tmp_path / "rec") as url:
        c = anthropic.Anthropic(
            base_url=url.removesuffix("/v1"),
            api_key="sk-ant",
            max_retries=0,
            default_headers={"x-replay-trajectory": "cs.1", "x-session-affinity": "claude-rl"},
        )
        [system, task] = PROMPT
        messages: list[Any] = [{"role": "user", "content": task["content"]}]
        for k in range(2):
            reply = c.messages.create(
                model="m", max_tokens=100, system=system["content"], messages=messages
            )
            assert reply.content[0].type == "text"
            assert reply.content[0].text == CALLS[k]["content"][0]["text"]
            assert not set(reply.model_dump_json().split('"')) & set(FIELDS)
            messages += [
                {"role": "assistant", "content": reply.content[0].text},
                {"role": "user", "content": AGAIN},
            ]
        line = httpx.get(url.removesuffix("/v1") + "/replay/sessions/claude-rl/rollout").json()
    calls = [o for o in line["response"]["output"] if o.get("role") == "assistant"]
    assert [{f: c.get(f) for f in FIELDS} for c in calls] == [recorded(0), recorded(1)]


def test_an_indented_body_is_recorded_one_line_per_exchange_and_still_exports(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    """The hand-off adds the prefix to the bytes as the client sent them, indented here: the
    recording still holds one exchange per line, so the session still exports."""
    fake = FakeUpstream().then(vllm_text("Live answer.", LIVE_PROMPT, LIVE_IDS, LIVE_LOGPROBS))
    records = tmp_path / "records"
    headers = {"x-replay-trajectory": "cs.1", "x-session-affinity": "pretty",
               "content-type": "application/json"}  # fmt: skip
    with (
        running(fake.app) as upstream,
        proxy(
            upstream=upstream + "/v1", trajectory_dir=folder_with_rollout(tmp_path),
            record_dir=records, replay_turns=2, handoff_tokens=True, offload_bytes=100,
        ) as url,
    ):  # fmt: skip
        history: list[Any] = list(PROMPT)
        for _ in range(3):
            body = json.dumps({"model": "m", "messages": history}, indent=2)
            answer = httpx.post(f"{url}/chat/completions", content=body, headers=headers)
            assert answer.status_code == 200, answer.text
            text = answer.json()["choices"][0]["message"]["content"]
            history += [{"role": "assistant", "content": text}, {"role": "user", "content": AGAIN}]
        line = httpx.get(url.removesuffix("/v1") + "/replay/sessions/pretty/rollout")
    assert line.status_code == 200, line.text
    [recording] = records.iterdir()
    lines = recording.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x)["type"] == "exchange" for x in lines)
    live = json.loads(lines[-1])
    assert live["forwarded"]["required_prefix_token_ids"] == (
        recorded(1)["prompt_token_ids"] + recorded(1)["generation_token_ids"]
    )
    assert "required_prefix_token_ids" in json.loads(fake.posts()[0].body)


def test_an_upstream_answer_whose_token_fields_cannot_be_a_calls_keeps_its_run(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    """Not the proxy's to vouch for: the live call is kept without them, and the run exports."""
    fake = FakeUpstream().then(
        lambda seen: Response(
            orjson.dumps(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "created": 1,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {
                                "role": "assistant",
                                "content": "Live answer.",
                                "prompt_token_ids": [1],
                                "generation_token_ids": [1, 2],
                                "generation_log_probs": [-0.1],
                            },
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
                }
            ),
            media_type="application/json",
        )
    )
    with (
        running(fake.app) as upstream,
        proxy(
            upstream=upstream + "/v1", trajectory_dir=folder_with_rollout(tmp_path),
            record_dir=tmp_path / "records", replay_turns=2,
        ) as url,
    ):  # fmt: skip
        c = client(url, "odd")
        history: list[Any] = list(PROMPT)
        for _ in range(3):
            text, _ = chat_call(c, history, False)
            history += [{"role": "assistant", "content": text}, {"role": "user", "content": AGAIN}]
        answer = httpx.get(url.removesuffix("/v1") + "/replay/sessions/odd/rollout")
    assert answer.status_code == 200, answer.text
    calls = [o for o in answer.json()["response"]["output"] if o.get("role") == "assistant"]
    assert [c["content"][0]["text"] for c in calls][-1] == "Live answer."
    assert [("generation_token_ids" in c) for c in calls] == [True, True, False]


SCRIPT = [
    {"role": "user", "content": "List the files."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_ls", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        ],
        "prompt_token_ids": [11, 12, 13],
        "generation_token_ids": [21, 22],
        "generation_log_probs": [-0.25, -0.5],
    },
    {"role": "tool", "tool_call_id": "call_ls", "content": "notes.txt"},
    {"role": "assistant", "content": "One file: notes.txt."},
]


@pytest.mark.parametrize(
    ("result", "sent"), [("notes.txt", [11, 12, 13, 21, 22]), ("other.txt", None)],
    ids=["restored", "restart-only"],
)  # fmt: skip
def test_the_prefix_goes_only_with_a_restored_session(
    proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, result: str, sent: Any
) -> None:
    """A tool result that came back otherwise than recorded: the live history is not what the
    recorded ids saw, so none are sent, and the header and the log say so."""
    fake = FakeUpstream().then(vllm_text("Done.", LIVE_PROMPT, LIVE_IDS, LIVE_LOGPROBS))
    path = write_trajectory(SCRIPT, name="ls")
    with (
        running(fake.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[path], replay_turns=1,
              handoff_tokens=True) as url,
    ):  # fmt: skip
        headers = {"x-replay-trajectory": "ls", "x-session-affinity": f"ls-{result}"}
        messages: list[Any] = [SCRIPT[0]]
        tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
        body = {"model": "m", "messages": messages, "tools": tools}
        first = httpx.post(f"{url}/chat/completions", json=body, headers=headers).json()
        first = first["choices"][0]["message"]
        assert first["generation_token_ids"] == [21, 22]
        messages += [
            {"role": "assistant", "content": None, "tool_calls": first["tool_calls"]},
            {"role": "tool", "tool_call_id": "call_ls", "content": result},
        ]
        live = httpx.post(f"{url}/chat/completions", json=body, headers=headers)
    assert live.status_code == 200
    [seen] = fake.posts()
    assert seen.json.get("required_prefix_token_ids") == sent
    assert live.headers["x-replay-handoff-tokens"] == str(len(sent) if sent else 0)


@pytest.mark.parametrize("token_in", [False, True], ids=["plain-upstream", "token-in"])
def test_token_fields_a_client_sends_back_reach_only_a_token_in_upstream(
    proxy: ProxyFactory, tmp_path: Path, token_in: bool
) -> None:
    """A loop that appends the SDK's message as it is sends the served fields back; a plain API
    may refuse them, so they are taken out, unless the upstream takes token ids."""
    fake = FakeUpstream().then(vllm_text("Live answer.", LIVE_PROMPT, LIVE_IDS, LIVE_LOGPROBS))
    with (
        running(fake.app) as upstream,
        proxy(
            upstream=upstream + "/v1", trajectory_dir=folder_with_rollout(tmp_path),
            replay_turns=2, handoff_tokens=token_in,
        ) as url,
    ):  # fmt: skip
        c = client(url, f"echo-{token_in}")
        history: list[Any] = list(PROMPT)
        for _ in range(3):
            reply = c.chat.completions.create(model="m", messages=history)
            history += [reply.choices[0].message.model_dump(exclude_none=True)]
            history += [{"role": "user", "content": AGAIN}]
    assert all("generation_token_ids" in m for m in history[2:6:2])  # sent back, as served
    [live] = fake.posts()
    echoed = [m for m in live.json["messages"] if "generation_token_ids" in m]
    assert len(echoed) == (2 if token_in else 0)
    assert [m["content"] for m in live.json["messages"]] == [m["content"] for m in history[:6]]
