"""A published NeMo-Gym tau2 rollout (tests/fixtures/corpus) replayed to a harness that sends
what tau2's agent sends: the system prompt, the environment's greeting as an assistant message,
then the user's request. Every recorded step is served with its recorded id, through Responses
and through Chat Completions, and the model is never asked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import openai

from tests.conftest import ROOT, ProxyFactory
from tests.helpers.independent import nemo_gym
from tests.helpers.servers import FakeUpstream

ROLLOUT = ROOT / "tests/fixtures/corpus/nemo-gym/tau2.jsonl"
ROW = json.loads(ROLLOUT.read_text())
ITEMS = ROW["responses_create_params"]["input"]
OUTPUTS = {
    item["call_id"]: item["output"]
    for item in [*ITEMS, *ROW["response"]["output"]]
    if item.get("type") == "function_call_output"
}
TOOLS = [t["name"] for t in ROW["responses_create_params"]["tools"]]
PROMPT = ITEMS[:3]  # system, the greeting, the user's request


def text(item: dict[str, Any]) -> str:
    content = item["content"]
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def served(folder: Path, proxy: ProxyFactory, upstream_url: str, api: str) -> list[list[str]]:
    headers = {"x-replay-trajectory": "tau2.1", "x-session-affinity": f"tau2-{api}"}
    client = openai.OpenAI(base_url="", api_key="sk", max_retries=0, default_headers=headers)
    steps: list[list[str]] = []
    with proxy(upstream=upstream_url, trajectory_dir=folder) as url:
        client = client.with_options(base_url=url)
        if api == "responses":
            history: list[Any] = [{"role": item["role"], "content": text(item)} for item in PROMPT]
            offered: list[Any] = [{"type": "function", "name": n, "parameters": {}} for n in TOOLS]
            while len(steps) < 10:
                answer = client.responses.create(model="m", input=history, tools=offered)
                calls = [o for o in answer.output if o.type == "function_call"]
                steps.append([c.call_id for c in calls])
                if not calls:
                    return steps
                history += [o.model_dump(exclude_none=True) for o in answer.output]
                history += [
                    {
                        "type": "function_call_output",
                        "call_id": c.call_id,
                        "output": OUTPUTS[c.call_id],
                    }
                    for c in calls
                ]
        else:
            messages: list[Any] = [{"role": item["role"], "content": text(item)} for item in PROMPT]
            tools: list[Any] = [
                {"type": "function", "function": {"name": n, "parameters": {}}} for n in TOOLS
            ]
            while len(steps) < 10:
                reply = client.chat.completions.create(model="m", messages=messages, tools=tools)
                message = reply.choices[0].message
                calls = message.tool_calls or []
                steps.append([c.id for c in calls])
                if not calls:
                    return steps
                messages.append(message.model_dump(exclude_none=True))
                messages += [
                    {"role": "tool", "tool_call_id": c.id, "content": OUTPUTS[c.id]} for c in calls
                ]
    raise AssertionError(f"the replay did not end: {steps}")


def test_the_tau2_rollout_replays_its_recorded_steps_on_both_apis(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    fake, upstream_url = upstream
    folder = tmp_path / "rollouts"
    folder.mkdir()
    shutil.copy(ROLLOUT, folder / "tau2.jsonl")
    [expected] = nemo_gym(ROLLOUT)  # read from the raw items, not by the proxy
    assert [len(s) for s in expected] == [1, 1, 1, 1, 0]
    for api in ("responses", "chat"):
        assert served(folder, proxy, upstream_url, api) == expected, api
    assert fake.requests == []  # every answer was the recording's


CODING = ROOT / "tests/fixtures/corpus/nemo-gym/competitive_coding.jsonl"


def test_a_rollouts_recorded_usage_is_reported_on_every_api_and_replays_are_identical(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    """NeMo-Gym's competitive_coding rollout records one model call: 109 input and 785 output
    tokens. Its replay says so, in each API's own fields, and two replays give the same bytes."""
    row = json.loads(CODING.read_text().splitlines()[0])
    task, recorded = row["responses_create_params"]["input"], row["response"]["usage"]
    folder = tmp_path / "rollouts"
    folder.mkdir()
    shutil.copy(CODING, folder / "coding.jsonl")
    requests = {
        "/v1/responses": {"model": "m", "input": task},
        "/v1/chat/completions": {"model": "m", "messages": [{"role": "user", "content": task}]},
        "/v1/messages": {
            "model": "m",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": task}],
        },
    }

    def replay(session: str) -> dict[str, bytes]:
        answers = {}
        with proxy(trajectory_dir=folder) as url:
            root = url.removesuffix("/v1")
            for path, body in requests.items():
                headers = {
                    "x-replay-trajectory": "coding.1",
                    "x-session-affinity": session + path.replace("/", "-"),
                }
                answer = httpx.post(root + path, json=body, headers=headers)
                assert answer.status_code == 200, answer.text
                answers[path] = answer.content
            status = httpx.get(f"{root}/replay/sessions").json()["data"]
        assert {s["usage"]["recorded"] for s in status} == {1}
        return answers

    first, second = replay("run"), replay("run")
    assert first == second  # ids, times and usage: the same bytes
    responses = json.loads(first["/v1/responses"])
    assert responses["usage"]["input_tokens"] == recorded["input_tokens"] == 109
    assert responses["usage"]["output_tokens"] == recorded["output_tokens"] == 785
    assert responses["created_at"] == int(row["response"]["created_at"])
    chat = json.loads(first["/v1/chat/completions"])["usage"]
    assert (chat["prompt_tokens"], chat["completion_tokens"], chat["total_tokens"]) == (
        109,
        785,
        894,
    )
    claude = json.loads(first["/v1/messages"])["usage"]
    assert (claude["input_tokens"], claude["output_tokens"]) == (109, 785)
