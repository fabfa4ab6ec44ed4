"""The session in the base URL (/s/{session}/v1, /s/{session}/t/{name}/v1) and an upstream per
session ({session} and {trajectory} in --upstream and --upstream-header), over real sockets with
the openai, anthropic and google-genai SDKs given nothing but a base URL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from google import genai
from google.genai import types

from proxy.config import Settings
from tests.conftest import ProxyFactory
from tests.helpers.agent import RECORDED, SYSTEM, TASK, TOOLS, agent_step, follow
from tests.helpers.servers import FakeUpstream, text


def openai_client(base_url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=base_url, api_key="sk-client-key", max_retries=0)


def sessions(root: str) -> dict[str, dict[str, Any]]:
    data = httpx.get(root + "/replay/sessions").json()["data"]
    return {s["session"]: s for s in data}


def test_the_openai_sdk_with_only_a_base_url_replays_its_session(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    fake.then(text("All done."))
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        root = url.removesuffix("/v1")
        c = openai_client(f"{root}/s/rollout-7/v1")
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        while True:
            message, headers = agent_step(c, messages, stream=True)
            assert headers["x-replay-session"] == "rollout-7"
            if not message["tool_calls"]:
                break
            follow(messages, message)
        status = sessions(root)["rollout-7"]
    assert message["content"] == "All done."
    assert status["turns_served"] == 2 and status["phase"] == "live", status
    # forwarded with the prefix taken off
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"]


def test_a_trajectory_named_in_the_path_binds_the_session(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    other = [RECORDED[0], {"role": "user", "content": "Something else."}, RECORDED[2]]
    paths = [write_trajectory(other, name="other"), write_trajectory(RECORDED, name="wanted")]
    with proxy(trajectory=paths) as url:
        root = url.removesuffix("/v1")
        c = openai_client(f"{root}/s/rollout-8/t/wanted/v1")
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        message, _ = agent_step(c, messages, stream=False)
        status = sessions(root)["rollout-8"]
    assert [call["id"] for call in message["tool_calls"]] == ["call_A"]
    assert status["script"]["name"] == "wanted" and status["script"]["bound_by"] == "header"


def test_the_hand_off_turn_in_the_path_replays_k_turns_then_goes_live(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    """A runner resuming a crashed rollout at its last durable turn, with only a base URL."""
    fake, upstream_url = upstream
    fake.then(text("Live from turn 2."))
    paths = [write_trajectory(RECORDED, name="wanted")]
    with proxy(upstream=upstream_url, trajectory=paths) as url:
        root = url.removesuffix("/v1")
        c = openai_client(f"{root}/s/rollout-9/t/wanted/k/1/v1")
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        first, headers = agent_step(c, messages, stream=False)
        assert headers["x-replay-turn"] == "1/1"  # K of the script's 2 turns
        follow(messages, first)
        live, headers = agent_step(c, messages, stream=False)
        status = sessions(root)["rollout-9"]
    assert live["content"] == "Live from turn 2." and headers["x-replay-source"] == "upstream"
    assert status["replay_turns"] == 1 and status["turns_served"] == 1
    assert status["phase"] == "live" and status["script"]["name"] == "wanted"
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"]  # the prefix taken off


def test_the_anthropic_and_gemini_sdks_take_the_prefix_as_their_root(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    with proxy(trajectory=[write_trajectory(RECORDED)]) as url:
        root = url.removesuffix("/v1")
        claude = anthropic.Anthropic(base_url=f"{root}/s/claude-1", api_key="k", max_retries=0)
        first = claude.messages.create(
            model="claude-test",
            max_tokens=100,
            system=SYSTEM,
            messages=[{"role": "user", "content": TASK}],
            tools=[
                {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
                for t in TOOLS
            ],
        )
        options = types.HttpOptions(base_url=f"{root}/s/gemini-1")
        gemini = genai.Client(api_key="k", http_options=options)
        declarations = [
            types.FunctionDeclaration(
                name=t["function"]["name"],
                parameters_json_schema=t["function"]["parameters"],
            )
            for t in TOOLS
        ]
        answer = gemini.models.generate_content(
            model="gemini-2.5-pro",
            contents=TASK,
            config=types.GenerateContentConfig(
                system_instruction=SYSTEM,
                tools=[types.Tool(function_declarations=declarations)],
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            ),
        )
        found = sessions(root)
    assert [b.id for b in first.content if b.type == "tool_use"] == ["call_A"]
    assert answer.function_calls and [c.args for c in answer.function_calls] == [
        {"command": "touch notes.txt"}
    ]
    assert found["claude-1"]["turns_served"] == 1 and found["gemini-1"]["turns_served"] == 1


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/s/bad%2Fname/v1/chat/completions", 400, "not a valid session id"),
        ("/s/..%2F..%2Fetc/v1/chat/completions", 400, "not a valid session id"),
        ("/s/ok/t/no%20spaces/v1/chat/completions", 400, "not a valid trajectory name"),
        ("/s/only-a-session", 400, "must be followed by the API's path"),
        ("/s/ok/k/two/v1/chat/completions", 400, "the turn in the path is 'two'"),
        ("/s/ok/t/name/k/-1/v1/chat/completions", 400, "the turn in the path is '-1'"),
        ("/s/ok/k/2", 400, "the turn must be followed by the API's path"),
        ("/s/ok/replay/sessions", 404, "not an API path"),
        ("/s/ok/healthz", 404, "not an API path"),
    ],
)
def test_a_bad_prefix_is_refused_in_the_apis_shape(
    path: str, status: int, says: str, proxy: ProxyFactory
) -> None:
    with proxy() as url:
        answer = httpx.post(url.removesuffix("/v1") + path, json={"messages": []})
    assert answer.status_code == status
    error = answer.json()["error"]
    assert says in error["message"]
    if status == 400:
        assert error["param"] == "path"


def test_each_session_goes_live_under_its_own_id_at_the_gateway(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    fake, upstream_url = upstream
    fake.then(text("live one"), text("live two"))
    gateway = upstream_url.removesuffix("/v1") + "/sessions/{session}/v1?rollout={trajectory}"
    with proxy(
        upstream=gateway, upstream_header=("x-rollout-id: {session}",), record_dir=tmp_path / "rec"
    ) as url:
        root = url.removesuffix("/v1")
        for session in ("r:1", "r-2"):
            c = openai_client(f"{root}/s/{session}/v1")
            c = c.with_options(default_headers={"x-rollout-id": "spoofed"})
            messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi."}]
            c.chat.completions.create(model="m", messages=messages)  # no script: live
        found = sessions(root)
        page = httpx.get(root + "/replay/ui").text
    seen = [(r.path, r.query, r.headers["x-rollout-id"]) for r in fake.requests]
    assert (
        "live at <code>" + upstream_url.removesuffix("/v1") + "/sessions/r%3A1/v1?rollout=</code>"
        in page
    )
    assert seen == [
        ("/sessions/r:1/v1/chat/completions", "rollout=", "r:1"),
        ("/sessions/r-2/v1/chat/completions", "rollout=", "r-2"),
    ]
    assert found["r:1"]["live_upstream"] == upstream_url.removesuffix("/v1") + (
        "/sessions/r%3A1/v1?rollout="
    )
    line = json.loads((tmp_path / "rec" / "r-2.jsonl").read_text().splitlines()[0])
    assert line["upstream"].endswith("/sessions/r-2/v1?rollout=")


def test_a_scripted_session_names_its_trajectory_to_the_gateway(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Any
) -> None:
    fake, upstream_url = upstream
    fake.then(text("All done."))
    gateway = upstream_url.removesuffix("/v1") + "/g/{trajectory}/{session}/v1"
    with proxy(upstream=gateway, trajectory=[write_trajectory(RECORDED, name="fix-1")]) as url:
        c = openai_client(url.removesuffix("/v1") + "/s/roll-3/v1")
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        while True:
            message, _ = agent_step(c, messages, stream=False)
            if not message["tool_calls"]:
                break
            follow(messages, message)
    assert [r.path for r in fake.requests] == ["/g/fix-1/roll-3/v1/chat/completions"]


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"upstream": "http://{session}.gw:9/v1"}, "never in its host"),
        ({"upstream": "http://gw:9/{rollout}/v1"}, "{rollout} is not a field"),
        ({"upstream": "http://gw:9/{session/v1"}, "a brace that opens no field"),
        ({"upstream_header": ("no colon here",)}, "expected 'Name: value'"),
        ({"upstream_header": ("x-id: {sid}",)}, "{sid} is not a field"),
    ],
)
def test_a_bad_template_stops_start_up_saying_why(settings: dict[str, Any], says: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=__import__("re").escape(says)):
        Settings(**settings)
