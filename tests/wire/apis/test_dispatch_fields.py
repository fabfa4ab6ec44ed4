"""Recorded call fields served whole, over real sockets with the official openai SDK: a Codex
multi_agent_v1 call keeps its `namespace` (Codex refuses `spawn_agent` without it) in the JSON
answer and in every SSE event that carries the item, from a Codex rollout and from a recording;
`check` warns that the field is served over the Responses API only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.responses import Response

from proxy.cli import main
from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, Seen, responses_text

SYSTEM = "You are Codex, a coding agent."
TASK = "Count the lines of notes.txt with a helper agent."
ARGS = '{"message": "Count the lines of notes.txt and report back."}'
SPAWN = {  # as Codex offers it: a namespace group
    "type": "function",
    "name": "spawn_agent",
    "description": "spawn a helper agent",
    "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
}


def rollout(path: Path) -> Path:
    def line(kind: str, payload: dict[str, Any]) -> str:
        return json.dumps(
            {"timestamp": "2026-12-04T20:03:31.193Z", "type": kind, "payload": payload}
        )

    item = {"type": "function_call", "name": "spawn_agent", "namespace": "multi_agent_v1",
            "arguments": ARGS, "call_id": "call_spawn"}  # fmt: skip
    lines = [
        line("session_meta", {"id": "019e1625", "base_instructions": {"text": SYSTEM}}),
        line(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": TASK}]},
        ),
        line("response_item", item),
        line("event_msg", {"type": "token_count", "info": None}),
        line(
            "response_item",
            {
                "type": "function_call_output",
                "call_id": "call_spawn",
                "output": '{"agent_id": "019e1626"}',
            },
        ),
        line(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "3 lines."}],
            },
        ),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def namespaced_call(seen: Seen) -> Response:
    """The upstream's answer while recording: a namespaced function call (JSON)."""
    item = {"id": "fc_up", "type": "function_call", "status": "completed", "name": "spawn_agent",
            "namespace": "multi_agent_v1", "arguments": ARGS, "call_id": "call_spawn"}  # fmt: skip
    body = {"id": "resp_up", "object": "response", "created_at": 1, "status": "completed",
            "model": seen.json.get("model"), "output": [item],
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}  # fmt: skip
    return Response(orjson.dumps(body), media_type="application/json")


def first_turn(url: str, session: str, *, stream: bool) -> dict[str, Any]:
    """The first turn through the SDK: the function_call items each place carries them."""
    import openai

    c = openai.OpenAI(base_url=url, api_key="k", max_retries=0,
                      default_headers={"session-id": session})  # fmt: skip
    args: dict[str, Any] = {"model": "gpt-test", "instructions": SYSTEM, "tools": [SPAWN],
                            "input": [{"role": "user", "content": TASK}]}  # fmt: skip
    if not stream:
        final = c.responses.create(**args)
        return {"completed": [o for o in final.output if o.type == "function_call"]}
    seen: dict[str, Any] = {"added": [], "done": [], "completed": []}
    for event in c.responses.create(**args, stream=True):
        if event.type in ("response.output_item.added", "response.output_item.done"):
            if event.item.type == "function_call":
                seen[event.type.rsplit(".", 1)[1]].append(event.item)
        elif event.type == "response.completed":
            seen["completed"] = [o for o in event.response.output if o.type == "function_call"]
    return seen


def assert_namespaced(seen: dict[str, Any], *, stream: bool) -> None:
    places = ("added", "done", "completed") if stream else ("completed",)
    for place in places:
        [call] = seen[place]
        assert (call.name, call.namespace, call.call_id) == (
            "spawn_agent",
            "multi_agent_v1",
            "call_spawn",
        ), place
    assert seen["completed"][0].arguments == ARGS  # verbatim


@pytest.mark.parametrize("stream", [False, True])
def test_a_codex_rollout_serves_the_namespace(
    stream: bool, proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    _, upstream_url = upstream
    path = rollout(tmp_path / "rollout-2026-12-04T20-03-31-019e1625.jsonl")
    with proxy(upstream=upstream_url, trajectory=[path]) as url:
        assert_namespaced(first_turn(url, "ses_rollout", stream=stream), stream=stream)


def test_a_recording_serves_the_namespace_as_recorded_and_rendered(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    fake, upstream_url = upstream
    folder = tmp_path / "rec"
    fake.then(namespaced_call, responses_text("3 lines."))
    with proxy(upstream=upstream_url, record_dir=folder) as url:
        first_turn(url, "ses_rec", stream=False)  # recorded as JSON
    recording = folder / "ses_rec.jsonl"
    assert recording.exists()
    for stream in (False, True):  # as recorded (the body whole), then rendered as SSE events
        with proxy(upstream=upstream_url, trajectory=[recording]) as url:
            seen = first_turn(url, f"ses_replay_{stream}", stream=stream)
        assert_namespaced(seen, stream=stream)


def test_check_warns_that_the_namespace_is_served_over_the_responses_api_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = rollout(tmp_path / "rollout-2026-12-04T20-03-31-019e1625.jsonl")
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "warning: turn 1, call call_spawn (spawn_agent): its namespace 'multi_agent_v1' is "
        "served only over the OpenAI Responses API" in out
    )
    assert main(["check", "--json", str(path)]) == 0
    [summary] = json.loads(capsys.readouterr().out)
    [call] = summary["turns"][0]["tool_calls"]
    assert call["dispatch"] == {"responses": {"namespace": "multi_agent_v1"}}


def test_anthropic_and_gemini_calls_keep_their_own_fields_over_their_own_api_only(
    proxy: ProxyFactory, write_trajectory: Any
) -> None:
    call = {
        "id": "toolu_01",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
        "dispatch": {
            "anthropic": {"caller": {"type": "direct"}},
            "gemini": {"thoughtSignature": "c2lnbmF0dXJl"},
        },
    }
    path = write_trajectory(
        [{"role": "user", "content": TASK}, {"role": "assistant", "content": None,
          "tool_calls": [call]}], name="fields")  # fmt: skip
    with proxy(trajectory=[path]) as url:
        root = url.removesuffix("/v1")
        tool = {"name": "bash", "input_schema": {"type": "object"}}
        anthropic = httpx.post(
            root + "/v1/messages",
            json={
                "model": "m",
                "max_tokens": 100,
                "tools": [tool],
                "messages": [{"role": "user", "content": TASK}],
            },
            headers={"x-session-affinity": "a1", "x-replay-trajectory": "fields"},
        ).json()
        gemini = httpx.post(
            root + "/v1beta/models/gemini-2.5-pro:generateContent",
            json={
                "contents": [{"role": "user", "parts": [{"text": TASK}]}],
                "tools": [{"functionDeclarations": [{"name": "bash"}]}],
            },
            headers={"x-session-affinity": "g1", "x-replay-trajectory": "fields"},
        ).json()
        chat = httpx.post(
            url + "/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": TASK}],
                "tools": [{"type": "function", "function": {"name": "bash"}}],
            },
            headers={"x-session-affinity": "c1", "x-replay-trajectory": "fields"},
        ).json()
    (use,) = [b for b in anthropic["content"] if b["type"] == "tool_use"]
    assert use["caller"] == {"type": "direct"} and "thoughtSignature" not in use
    (part,) = gemini["candidates"][0]["content"]["parts"]
    assert part["thoughtSignature"] == "c2lnbmF0dXJl" and "caller" not in part
    (served,) = chat["choices"][0]["message"]["tool_calls"]
    assert set(served) == {"id", "type", "function"}  # chat has no place for either
