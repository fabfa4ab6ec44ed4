"""The Responses API over a WebSocket, with the official openai SDK's socket client and a raw
`websockets` client: warm-ups, continuations by previous_response_id, scripted turns as the SSE
stream's events, the live part forwarded, record then strict replay with no upstream, faults,
bounds, and the refusals (--no-websocket's 426, a foreign page)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.conftest import ProxyFactory, own_redis
from tests.helpers.servers import FakeUpstream, responses_text, session_status, status

SYSTEM = "You are a careful coding agent."
TASK = "Create notes.txt, then list the directory."
TOOLS = [
    {
        "type": "function",
        "name": "bash",
        "description": "run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]
SCRIPT = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": TASK},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_A", "type": "function",
         "function": {"name": "bash", "arguments": '{"command":"touch notes.txt"}'}}]},
    {"role": "tool", "tool_call_id": "call_A", "content": ""},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_B", "type": "function",
         "function": {"name": "bash", "arguments": '{"command":"ls"}'}}]},
    {"role": "tool", "tool_call_id": "call_B", "content": "notes.txt"},
]  # fmt: skip
START = [{"role": "user", "content": [{"type": "input_text", "text": TASK}]}]


def ws_url(url: str, path: str = "/v1/responses") -> str:
    return url.removesuffix("/v1").replace("http://", "ws://") + path


def turn(sock: Any, **frame: Any) -> list[dict[str, Any]]:
    """One response.create frame and the events it got, to the last."""
    sock.send(json.dumps({"type": "response.create", "model": "gpt-test", **frame}))
    events = []
    while True:
        event = json.loads(sock.recv(timeout=30))
        events.append(event)
        if event["type"] in ("response.completed", "response.failed", "error"):
            return events


def output_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert events[-1]["type"] == "response.completed", events[-1]
    output: list[dict[str, Any]] = events[-1]["response"]["output"]
    return output


def result(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


@pytest.fixture
def script(write_trajectory: Any) -> Path:
    path: Path = write_trajectory(SCRIPT, name="two-calls")
    return path


def test_a_codex_shaped_socket_warms_up_continues_by_id_then_goes_live(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], script: Path
) -> None:
    fake, upstream_url = upstream
    fake.then(responses_text("All done."))
    with proxy(trajectory=[script], upstream=upstream_url) as url:
        with connect(ws_url(url), additional_headers={"x-session-affinity": "ws1"}) as sock:
            warm = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS, generate=False)
            assert [e["type"] for e in warm] == ["response.created", "response.completed"]
            assert warm[-1]["response"]["output"] == []
            # a warm-up takes no turn: the session is not even known yet
            assert httpx.get(url.removesuffix("/v1") + "/replay/sessions/ws1").status_code == 404

            first = turn(sock, instructions=SYSTEM, input=[], tools=TOOLS,
                         previous_response_id=warm[-1]["response"]["id"])  # fmt: skip
            kinds = [e["type"] for e in first]
            assert kinds[0] == "response.created" and "response.output_item.done" in kinds
            (call,) = output_of(first)
            assert (call["call_id"], call["arguments"]) == (
                "call_A",
                '{"command":"touch notes.txt"}',
            )
            assert session_status(url, "ws1")["turns_served"] == 1

            second = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_A", "")],
                          previous_response_id=first[-1]["response"]["id"])  # fmt: skip
            assert output_of(second)[0]["call_id"] == "call_B"

            live = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_B", "notes.txt")],
                        previous_response_id=second[-1]["response"]["id"])  # fmt: skip
            assert output_of(live)[0]["content"][0]["text"] == "All done."
        status = session_status(url, "ws1")
    assert status["turns_served"] == 2 and status["divergences"] == 0
    # upstream, over HTTP: the whole conversation, streamed, with no id it could not know
    (sent,) = fake.posts("/v1/responses")
    body = sent.json
    assert body["stream"] is True and "previous_response_id" not in body and "type" not in body
    assert [i.get("type", "message") for i in body["input"]] == [
        "message", "function_call", "function_call_output", "function_call", "function_call_output"
    ]  # fmt: skip
    assert sent.headers["x-session-affinity"] == "ws1"
    assert "upgrade" not in sent.headers and "sec-websocket-key" not in sent.headers


def test_the_official_sdk_socket_client_gets_the_scripted_turn(
    proxy: ProxyFactory, script: Path
) -> None:
    with proxy(trajectory=[script]) as url:
        client = openai.OpenAI(base_url=url, api_key="sk-client-key", max_retries=0)
        with client.responses.connect(
            extra_headers={"x-session-affinity": "sdk"}, max_retries=0
        ) as conn:
            conn.response.create(model="gpt-test", instructions=SYSTEM, input=START, tools=TOOLS)  # type: ignore[arg-type]
            for event in conn:
                if event.type == "response.completed":
                    break
        status = session_status(url, "sdk")
    call = event.response.output[0]
    assert call.type == "function_call" and call.call_id == "call_A"
    assert status["turns_served"] == 1


def test_a_continuation_of_an_unknown_response_is_an_error_frame_and_the_socket_goes_on(
    proxy: ProxyFactory, script: Path
) -> None:
    with (
        proxy(trajectory=[script]) as url,
        connect(ws_url(url), additional_headers={"x-session-affinity": "ws2"}) as sock,
    ):
        (error,) = turn(sock, input=[], previous_response_id="resp_elsewhere")
        assert error["status"] == 400
        assert error["error"]["code"] == "previous_response_not_found"
        assert "resp_elsewhere" in error["error"]["message"]
        (bad,) = turn(sock, input=[], stream_id="s2")
        assert bad["error"]["param"] == "stream_id"
        sock.send(b"\x00binary")
        assert json.loads(sock.recv(timeout=30))["error"]["param"] == "frame"
        sock.send(json.dumps({"type": "response.processed", "response_id": "r"}))  # a receipt
        (nope,) = turn(sock, input="hi", tools="not a list")
        assert nope["status"] == 400 and nope["error"]["param"] == "tools"
        first = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert output_of(first)[0]["call_id"] == "call_A"  # nothing was lost on the way


def test_record_over_a_socket_then_replay_it_strictly_with_no_upstream(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path, script: Path
) -> None:
    fake, upstream_url = upstream
    fake.then(responses_text("All done."))
    folder = tmp_path / "rec"

    def run(url: str) -> list[list[dict[str, Any]]]:
        with connect(ws_url(url), additional_headers={"x-session-affinity": "rec"}) as sock:
            warm = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS, generate=False)
            got = [turn(sock, instructions=SYSTEM, input=[], tools=TOOLS,
                        previous_response_id=warm[-1]["response"]["id"])]  # fmt: skip
            for call_id, out in (("call_A", ""), ("call_B", "notes.txt")):
                got.append(turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result(call_id, out)],
                                previous_response_id=got[-1][-1]["response"]["id"]))  # fmt: skip
        return got

    with proxy(trajectory=[script], upstream=upstream_url, record_dir=folder) as url:
        recorded = run(url)
    lines = [json.loads(x) for x in (folder / "rec.jsonl").read_text().splitlines()]
    exchanges = [x for x in lines if x["type"] == "exchange"]
    assert [(x["source"], x["path"], x["extra"]["transport"]) for x in exchanges] == [
        ("scripted", "/v1/responses", "websocket"),
        ("scripted", "/v1/responses", "websocket"),
        ("upstream", "/v1/responses", "websocket"),
    ]
    with proxy(trajectory=[folder / "rec.jsonl"], mode="strict") as url:
        replayed = run(url)
        status = session_status(url, "rec")
    assert [output_of(e) for e in replayed] == [output_of(e) for e in recorded]
    assert status["divergences"] == 0


def test_a_dropped_answer_closes_the_socket_and_a_new_one_gets_the_same_turn(
    proxy: ProxyFactory, script: Path
) -> None:
    with proxy(trajectory=[script], fault=["1:drop"]) as url:
        headers = {"x-session-affinity": "drop"}
        with connect(ws_url(url), additional_headers=headers) as sock:
            sock.send(json.dumps({"type": "response.create", "model": "m", "instructions": SYSTEM,
                                  "input": START, "tools": TOOLS}))  # fmt: skip
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    assert json.loads(sock.recv(timeout=30))["type"] != "response.completed"
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
        with connect(ws_url(url), additional_headers=headers) as sock:
            again = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert output_of(again)[0]["call_id"] == "call_A"
        metrics = httpx.get(url.removesuffix("/v1") + "/metrics").text
    assert 'replay_proxy_faults_injected_total{kind="drop"} 1.0' in metrics
    assert 'replay_proxy_websockets_total{event="opened"} 2.0' in metrics


def test_a_socket_is_told_to_reconnect_after_its_turn_limit(
    proxy: ProxyFactory, script: Path
) -> None:
    with (
        proxy(trajectory=[script], websocket_max_turns=1) as url,
        connect(ws_url(url), additional_headers={"x-session-affinity": "lim"}) as sock,
    ):
        turn(sock, instructions=SYSTEM, input=START, tools=TOOLS, generate=False)
        (error,) = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert error["error"]["code"] == "websocket_connection_limit_reached"
        with pytest.raises(ConnectionClosed):
            sock.recv(timeout=30)


def test_a_frame_over_the_body_limit_closes_the_socket(proxy: ProxyFactory, script: Path) -> None:
    with (
        proxy(trajectory=[script], max_body_bytes=4096) as url,
        connect(ws_url(url), max_size=None) as sock,
    ):
        sock.send(json.dumps({"type": "response.create", "input": "x" * 5000}))
        with pytest.raises(ConnectionClosed) as closed:
            sock.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


@pytest.mark.parametrize(
    ("settings", "headers", "path", "status"),
    [
        ({"websocket": False}, {}, "/v1/responses", 426),  # Codex: "use HTTP", at once
        ({}, {"origin": "https://evil.example"}, "/v1/responses", 403),  # a web page's socket
        ({}, {}, "/v1/chat/completions", 404),  # no other API takes a socket
        # choosing or branching a script by the socket's path or headers needs the admin token
        ({"admin_token": "socket-token-7Qm2Zp9Hx4"}, {}, "/s/v/t/two-calls/v1/responses", 401),
        ({"admin_token": "socket-token-7Qm2Zp9Hx4"}, {}, "/s/v/k/1/v1/responses", 401),
        ({"admin_token": "socket-token-7Qm2Zp9Hx4"}, {"x-replay-turns": "1"}, "/v1/responses", 401),
        ({}, {}, "/replay/sessions", 404),
    ],
)
def test_an_upgrade_the_proxy_will_not_take_gets_an_http_answer_that_says_why(
    proxy: ProxyFactory, settings: dict[str, Any], headers: dict[str, str], path: str, status: int
) -> None:
    with proxy(**settings) as url, pytest.raises(InvalidStatus) as refused:
        connect(ws_url(url, path), additional_headers=headers)
    answer = refused.value.response
    assert answer.status_code == status
    assert json.loads(answer.body or b"{}")["error"]["message"]


def test_an_injected_429_is_an_error_frame_and_the_retry_gets_the_turn(
    proxy: ProxyFactory, script: Path
) -> None:
    with (
        proxy(trajectory=[script], fault=["1:429:0.01"]) as url,
        connect(ws_url(url, "/s/fault-1/v1/responses")) as sock,  # the session in the path
    ):
        (limited,) = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert limited["status"] == 429 and "fault injected" in limited["error"]["message"]
        again = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert output_of(again)[0]["call_id"] == "call_A"
        status = session_status(url, "fault-1")
    assert status["turns_served"] == 1
    assert [f["kind"] for f in status["faults"]["injected"]] == ["429:0.01"]


def test_a_long_conversation_continued_over_a_socket_is_served_and_shown_like_any_other(
    proxy: ProxyFactory, script: Path
) -> None:
    big = "line of tool output\n" * 40_000  # 800 KB: read and written beside the event loop
    with (
        proxy(trajectory=[script]) as url,
        connect(ws_url(url), additional_headers={"x-session-affinity": "ws-long-1"}) as sock,
    ):
        first = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        second = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_A", big)],
                      previous_response_id=first[-1]["response"]["id"])  # fmt: skip
        assert output_of(second)[0]["call_id"] == "call_B"
        third = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_B", "notes.txt")],
                     previous_response_id=second[-1]["response"]["id"])  # fmt: skip
        assert third[-1]["type"] == "error" and third[-1]["status"] == 503  # no upstream to go to
        page = httpx.get(url.removesuffix("/v1") + "/replay/ui").text
        status = session_status(url, "ws-long-1")
    assert status["turns_served"] == 2 and status["tool_results"]["returned"] == 2
    assert "ws-long-1" in page and "2/2" in page


def test_an_upstream_that_answers_a_stream_in_one_json_body_still_completes_the_turn(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], script: Path
) -> None:
    fake, upstream_url = upstream
    whole = {"id": "resp_whole", "object": "response", "status": "completed", "output": [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Whole."}]}
    ]}  # fmt: skip
    fake.then(status(200, whole))
    with (
        proxy(trajectory=[script], upstream=upstream_url) as url,
        connect(ws_url(url), additional_headers={"x-session-affinity": "whole"}) as sock,
    ):
        first = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        second = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_A", "")],
                      previous_response_id=first[-1]["response"]["id"])  # fmt: skip
        (live,) = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_B", "x")],
                       previous_response_id=second[-1]["response"]["id"])  # fmt: skip
        assert output_of([live])[0]["content"][0]["text"] == "Whole."
        # and the socket continues from it
        (error,) = turn(sock, input=[], previous_response_id="resp_other")
        assert "resp_whole" in error["error"]["message"]


@pytest.mark.parametrize("fault", ["1:stall:0.2", "1:delay:0.2"])
def test_a_stalled_or_delayed_turn_still_arrives_whole_over_the_socket(
    proxy: ProxyFactory, script: Path, fault: str
) -> None:
    with (
        proxy(trajectory=[script], fault=[fault]) as url,
        connect(ws_url(url), additional_headers={"x-session-affinity": "slow"}) as sock,
    ):
        events = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        status = session_status(url, "slow")
    assert events[0]["type"] == "response.created"
    assert output_of(events)[0]["call_id"] == "call_A"
    assert [f["kind"] for f in status["faults"]["injected"]] == [fault.split(":", 1)[1]]


def test_the_session_and_its_hand_off_turn_in_the_sockets_path(
    proxy: ProxyFactory, script: Path
) -> None:
    with (
        proxy(trajectory=[script]) as url,
        connect(ws_url(url, "/s/ws-k/t/two-calls/k/1/v1/responses")) as sock,
    ):
        first = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert output_of(first)[0]["call_id"] == "call_A"
        (live,) = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_A", "")],
                       previous_response_id=first[-1]["response"]["id"])  # fmt: skip
        assert live["status"] == 503  # turn 2 goes live, and this proxy has no upstream
        status = session_status(url, "ws-k")
    assert status["replay_turns"] == 1 and status["turns_served"] == 1


def test_a_store_that_fails_mid_socket_is_an_error_frame_and_the_socket_stays_open(
    proxy: ProxyFactory, script: Path, tmp_path: Path
) -> None:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server, or run .ci/run)")
    with (
        own_redis(binary, tmp_path) as (store, redis),
        proxy(trajectory=[script], store=store) as url,
        connect(ws_url(url), additional_headers={"x-session-affinity": "st"}) as sock,
    ):
        first = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert output_of(first)[0]["call_id"] == "call_A"
        redis.kill()
        redis.wait()
        (failed,) = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert failed["status"] == 503 and "session store" in failed["error"]["message"]
        sock.send(json.dumps({"type": "response.processed", "response_id": "r"}))
        (again,) = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
        assert again["status"] == 503  # answered on the same socket: it stayed open
