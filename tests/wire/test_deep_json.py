"""JSON nested deeper than the proxy can handle is a 400 that names the limit, in each API's own
shape, and the session goes on as before; up to the limit, a request is served as usual."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from proxy.nesting import MAX_DEPTH
from tests.conftest import ProxyFactory
from tests.helpers.agent import RECORDED, TOOLS, agent_step, client, follow, start_messages
from tests.helpers.servers import FakeUpstream, text

DEEP = "__deep__"


def nested(depth: int) -> bytes:
    """`depth` levels of arrays and objects, alternating, around a string, as JSON (written by
    hand: a JSON library would refuse it too)."""
    opening = b"".join(b'{"a": ' if level % 2 else b"[" for level in range(depth))
    closing = b"".join(b"}" if level % 2 else b"]" for level in reversed(range(depth)))
    return opening + b'"bottom"' + closing


def raw(body: dict[str, Any], depth: int) -> bytes:
    return orjson.dumps(body).replace(b'"%s"' % DEEP.encode(), nested(depth))


def bodies() -> dict[str, tuple[str, dict[str, Any]]]:
    deep = DEEP
    user = {"role": "user", "content": "t"}
    return {
        "chat": ("/v1/chat/completions", {"model": "m", "messages": [user], "metadata": deep}),
        "responses": (
            "/v1/responses",
            {"model": "m", "input": [user, {"role": "user", "content": deep}]},
        ),
        "anthropic": (
            "/v1/messages",
            {"model": "m", "max_tokens": 9, "messages": [user], "metadata": deep},
        ),
        "gemini": (
            "/v1beta/models/m:generateContent",
            {
                "contents": [
                    {"role": "user", "parts": [{"text": "t"}]},
                    {"role": "model", "parts": [{"functionCall": {"name": "bash", "args": {}}}]},
                    {
                        "role": "user",
                        "parts": [{"functionResponse": {"name": "bash", "response": deep}}],
                    },
                ]
            },
        ),
    }


def post(url: str, content: bytes, **headers: str) -> httpx.Response:
    return httpx.post(url, content=content, headers={"content-type": "application/json", **headers})


@pytest.mark.parametrize("depth", [MAX_DEPTH, 1000, 1100])  # one past it, with the body's own
def test_too_deep_is_a_400_naming_the_limit_on_every_api(proxy: ProxyFactory, depth: int) -> None:
    with proxy() as url:
        root = url.removesuffix("/v1")
        answers = {
            api: post(root + path, raw(body, depth)) for api, (path, body) in bodies().items()
        }
        health = httpx.get(root + "/healthz")
    assert health.status_code == 200
    for api, answer in answers.items():
        assert answer.status_code == 400, (api, answer.text)
        assert "nested more than 250 levels deep (the limit is 250)" in answer.text, api
    assert answers["anthropic"].json()["type"] == "error"
    assert answers["gemini"].json()["error"]["status"] == "INVALID_ARGUMENT"
    assert answers["chat"].json()["error"]["code"] == "nested_too_deep"


def test_at_the_limit_a_request_goes_upstream_and_is_recorded_and_dumped(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    fake, upstream_url = upstream
    fake.fallback = text("fine")
    settings = {"record_dir": tmp_path / "rec", "dump_dir": tmp_path / "dumps"}
    with proxy(upstream=upstream_url, **settings) as url:
        path, body = bodies()["chat"]  # the limit in all, with the body's own level
        answer = post(url.removesuffix("/v1") + path, raw(body, MAX_DEPTH - 1))
    assert answer.status_code == 200, answer.text
    assert fake.posts()[0].body == raw(body, MAX_DEPTH - 1)
    [recorded] = (tmp_path / "rec").iterdir()  # written out whole, wrapped in its line
    line = orjson.loads(recorded.read_bytes().splitlines()[0])
    assert line["status"] == 200 and line["error"] is None
    assert line["request"] == orjson.loads(raw(body, MAX_DEPTH - 1))
    assert len(list((tmp_path / "dumps").iterdir())) == 1


def test_a_too_deep_request_leaves_the_session_as_it_was(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    with proxy(trajectory=[write_trajectory(RECORDED)]) as url:
        c = client(url, **{"x-session-affinity": "deep-1"})
        messages = start_messages()
        answer, headers = agent_step(c, messages, stream=False)
        assert headers["x-replay-turn"] == "1/2"
        follow(messages, answer)
        body = {"model": "m", "messages": messages, "metadata": DEEP}
        refused = post(
            url + "/chat/completions", raw(body, 600), **{"x-session-affinity": "deep-1"}
        )
        answer, headers = agent_step(c, messages, stream=True)
        status = httpx.get(url.removesuffix("/v1") + "/replay/sessions/deep-1").json()
    assert refused.status_code == 400
    assert headers["x-replay-turn"] == "2/2"  # the next turn, as if nothing had happened
    assert status["turns_served"] == 2


def _deep_text(depth: int) -> str:
    return nested(depth).decode()


@pytest.mark.parametrize("mode", ["resume", "strict"])
@pytest.mark.parametrize("where", ["tool result", "call arguments"])
def test_json_nested_deep_inside_a_string_is_data_and_the_session_goes_on(
    proxy: ProxyFactory,
    write_trajectory: Callable[..., Path],
    tmp_path: Path,
    mode: str,
    where: str,
) -> None:
    """A tool may print JSON nested a thousand deep, and a model may write it as arguments: the
    proxy parses such text only to compare it, and compares it as text when it nests deeper
    than a request may. It used to be a 500 on every retry of the same history: stuck."""
    recorded = tmp_path / "rec"
    with proxy(trajectory=[write_trajectory(RECORDED)], record_dir=recorded, mode=mode) as url:
        c = client(url, **{"x-session-affinity": "deep-2"})
        messages = start_messages()
        answer, _ = agent_step(c, messages, stream=False)
        follow(messages, answer, lambda call: _deep_text(300) if where == "tool result" else "")
        if where == "call arguments":
            messages[-2]["tool_calls"][0]["function"]["arguments"] = _deep_text(1000)
        messages.append(RECORDED[4])
        sent = orjson.dumps({"model": "m", "messages": messages, "tools": TOOLS})
        second = post(url + "/chat/completions", sent, **{"x-session-affinity": "deep-2"})
        status = httpx.get(url.removesuffix("/v1") + "/replay/sessions/deep-2").json()
    assert second.status_code == 200, second.text
    assert second.headers["x-replay-turn"] == "2/2"
    assert status["turns_served"] == 2
    if where == "tool result":  # compared with the recorded output, as text: it differs
        assert status["observations"]["differing"] == 1
