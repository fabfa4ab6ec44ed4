"""A client socket's live turns upstream (--upstream-websocket): over a WebSocket of their own
where the upstream serves Responses over one (the whole input first, then only the new items with
previous_response_id), over HTTP SSE where it refuses the upgrade, and never over a socket with
`never`; with `always`, a refusal is the turn's error. Real sockets on both legs."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, responses_text, running
from tests.helpers.socket_upstream import DROP, ERROR, LAST, SocketUpstream
from tests.wire.http.test_websocket import (
    SCRIPT,
    START,
    SYSTEM,
    TOOLS,
    output_of,
    result,
    turn,
    ws_url,
)

CLIENT_KEY = "sk-client-secret-0001"
PROXY_KEY = "sk-proxy-secret-0002"
NEXT = {"role": "user", "content": [{"type": "input_text", "text": "Now add a line to it."}]}


@pytest.fixture
def script(write_trajectory: Any) -> Path:
    path: Path = write_trajectory(SCRIPT, name="two-calls")
    return path


@pytest.fixture
def sockets() -> Iterator[tuple[SocketUpstream, str]]:
    fake = SocketUpstream()
    with running(fake.app) as url:
        yield fake, url + "/v1"


def _client(url: str, session: str) -> Any:
    headers = {"x-session-affinity": session, "authorization": f"Bearer {CLIENT_KEY}"}
    return connect(ws_url(url), additional_headers=headers)


def _whole() -> list[dict[str, Any]]:
    """The conversation of the first live turn, sent whole."""
    calls = [
        {"type": "function_call", "call_id": c, "name": "bash", "arguments": a}
        for c, a in (("call_A", '{"command":"touch notes.txt"}'), ("call_B", '{"command":"ls"}'))
    ]
    return [*START, calls[0], result("call_A", ""), calls[1], result("call_B", "notes.txt")]


def _proxy_logs(caplog: pytest.LogCaptureFixture) -> str:
    """What the proxy logged (the test's own websockets client logs its headers at DEBUG)."""
    return "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("proxy"))


def _scripted(sock: Any) -> list[dict[str, Any]]:
    """The script's two turns, then the first live one: the conversation so far, as events."""
    first = turn(sock, instructions=SYSTEM, input=START, tools=TOOLS)
    second = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_A", "")],
                  previous_response_id=first[-1]["response"]["id"])  # fmt: skip
    return turn(sock, instructions=SYSTEM, tools=TOOLS, input=[result("call_B", "notes.txt")],
                previous_response_id=second[-1]["response"]["id"])  # fmt: skip


def test_live_turns_go_over_the_upstream_socket_and_the_second_sends_only_the_new_items(
    proxy: ProxyFactory,
    sockets: tuple[SocketUpstream, str],
    script: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake, upstream_url = sockets
    fake.then("First live answer.", "Second live answer.")
    folder = tmp_path / "rec"
    with (
        caplog.at_level(logging.DEBUG),
        proxy(
            trajectory=[script],
            upstream=upstream_url,
            record_dir=folder,
            upstream_api_key=PROXY_KEY,
        ) as url,  # fmt: skip
        _client(url, "up1") as sock,
    ):
        live = _scripted(sock)
        assert output_of(live)[0]["content"][0]["text"] == "First live answer."
        assert [e["type"] for e in live][:3] == [
            "response.created", "response.output_item.added", "response.output_text.delta"
        ]  # fmt: skip
        again = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[NEXT],
                     previous_response_id=live[-1]["response"]["id"])  # fmt: skip
        assert output_of(again)[0]["content"][0]["text"] == "Second live answer."
    assert fake.http.requests == []  # nothing over HTTP
    (upgrade,) = fake.upgrades  # one upstream socket for the client's socket
    assert upgrade["authorization"] == f"Bearer {PROXY_KEY}"
    assert "replay-proxy-" in upgrade["via"] and upgrade["x-session-affinity"] == "up1"
    whole, new = fake.frames
    assert whole["type"] == "response.create" and "previous_response_id" not in whole
    assert "stream" not in whole and whole["instructions"] == SYSTEM
    assert [i.get("type", "message") for i in whole["input"]] == [
        "message", "function_call", "function_call_output", "function_call", "function_call_output"
    ]  # fmt: skip
    assert new["previous_response_id"] == "resp_up_1" and new["input"] == [NEXT]
    assert new["tools"] == TOOLS
    text = (folder / "up1.jsonl").read_text()
    exchanges = [json.loads(x) for x in text.splitlines() if '"exchange"' in x]
    upstream = [x for x in exchanges if x["source"] == "upstream"]
    assert [x["extra"] for x in upstream] == [
        {"transport": "websocket", "upstream_transport": "websocket"}
    ] * 2
    assert "Second live answer." in json.dumps(upstream[1])
    logs = _proxy_logs(caplog)
    assert logs  # the requests were logged
    for secret in (CLIENT_KEY, PROXY_KEY):
        assert secret not in text and secret not in logs


def test_an_upstream_that_refuses_the_upgrade_gets_http_from_then_on_and_the_log_says_so(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    script: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake, upstream_url = upstream
    fake.then(responses_text("Over HTTP."), responses_text("Over HTTP again."))
    with (
        caplog.at_level(logging.INFO),
        proxy(trajectory=[script], upstream=upstream_url, upstream_api_key=PROXY_KEY) as url,
    ):
        for session in ("fb1", "fb2"):
            with _client(url, session) as sock:
                live = _scripted(sock)
                assert output_of(live)[0]["content"][0]["text"].startswith("Over HTTP")
    assert len(fake.posts("/v1/responses")) == 2
    said = [r.getMessage() for r in caplog.records if "refused a WebSocket" in r.getMessage()]
    assert len(said) == 1, said  # once, not on every socket
    assert "HTTP 403" in said[0] and "over HTTP SSE from now on" in said[0]
    logs = _proxy_logs(caplog)
    assert CLIENT_KEY not in logs and PROXY_KEY not in logs


def test_a_refusal_that_may_pass_sends_that_turn_over_http_and_the_next_socket_tries_again(
    proxy: ProxyFactory,
    sockets: tuple[SocketUpstream, str],
    script: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake, upstream_url = sockets
    fake.refuse(503)  # the upstream busy, not without sockets
    fake.http.then(responses_text("Over HTTP this once."))
    with caplog.at_level(logging.INFO), proxy(trajectory=[script], upstream=upstream_url) as url:
        with _client(url, "busy1") as sock:
            assert output_of(_scripted(sock))[0]["content"][0]["text"] == "Over HTTP this once."
        with _client(url, "busy2") as sock:
            assert output_of(_scripted(sock))[0]["content"][0]["text"] == "live over a socket"
    assert len(fake.upgrades) == 2 and len(fake.http.posts("/v1/responses")) == 1
    said = [r.getMessage() for r in caplog.records if "refused a WebSocket" in r.getMessage()]
    assert len(said) == 1 and "HTTP 503" in said[0] and "this live turn" in said[0]


def test_never_sends_live_turns_over_http_even_where_the_upstream_takes_a_socket(
    proxy: ProxyFactory, sockets: tuple[SocketUpstream, str], script: Path
) -> None:
    fake, upstream_url = sockets
    fake.http.then(responses_text("Over HTTP."))
    with (
        proxy(trajectory=[script], upstream=upstream_url, upstream_websocket="never") as url,
        _client(url, "nv") as sock,
    ):
        assert output_of(_scripted(sock))[0]["content"][0]["text"] == "Over HTTP."
    assert fake.upgrades == [] and len(fake.http.posts("/v1/responses")) == 1


def test_always_with_an_upstream_that_refuses_gives_the_client_an_error_frame_saying_why(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], script: Path
) -> None:
    fake, upstream_url = upstream
    with (
        proxy(trajectory=[script], upstream=upstream_url, upstream_websocket="always") as url,
        _client(url, "al") as sock,
    ):
        (error,) = _scripted(sock)
        assert error["type"] == "error" and error["status"] == 502
        assert error["error"]["code"] == "upstream_websocket_refused"
        message = error["error"]["message"]
        assert "refused a WebSocket" in message and "HTTP 403" in message and "auto" in message
    assert fake.requests == []


def test_an_upstream_error_frame_is_the_clients_error_and_a_drop_breaks_the_answer_off(
    proxy: ProxyFactory, sockets: tuple[SocketUpstream, str], script: Path
) -> None:
    fake, upstream_url = sockets
    fake.then(ERROR, DROP, "After the drop.")
    with proxy(trajectory=[script], upstream=upstream_url) as url:
        with _client(url, "dr") as sock:
            (error,) = _scripted(sock)
            assert error["status"] == 429 and error["error"]["code"] == "rate_limit_exceeded"
            # the same turn again, whole (an error frame leaves no response to continue from)
            sock.send(json.dumps({"type": "response.create", "model": "m", "instructions": SYSTEM,
                                  "tools": TOOLS, "input": _whole()}))  # fmt: skip
            with pytest.raises(ConnectionClosed) as closed:
                while True:
                    assert json.loads(sock.recv(timeout=30)).get("type") != "response.completed"
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
        with _client(url, "dr") as sock:  # a new client socket: a new upstream socket
            answer = turn(sock, instructions=SYSTEM, tools=TOOLS, input=_whole())
            assert output_of(answer)[0]["content"][0]["text"] == "After the drop."
    assert len(fake.upgrades) == 2


def test_an_upstream_socket_closed_between_turns_is_opened_again_and_the_turn_sent_whole(
    proxy: ProxyFactory, sockets: tuple[SocketUpstream, str], script: Path
) -> None:
    fake, upstream_url = sockets
    fake.then(LAST + "Then the upstream closed.", "On a new socket.")
    with (
        proxy(trajectory=[script], upstream=upstream_url) as url,
        _client(url, "re") as sock,
    ):
        live = _scripted(sock)
        assert output_of(live)[0]["content"][0]["text"] == "Then the upstream closed."
        again = turn(sock, instructions=SYSTEM, tools=TOOLS, input=[NEXT],
                     previous_response_id=live[-1]["response"]["id"])  # fmt: skip
        assert output_of(again)[0]["content"][0]["text"] == "On a new socket."
    assert len(fake.upgrades) == 2
    first, second = fake.frames
    assert "previous_response_id" not in second  # the new socket holds nothing to continue
    assert second["input"][: len(first["input"])] == first["input"]
    assert second["input"][-1] == NEXT


def test_a_per_session_upstream_gets_the_socket_at_its_own_url_with_its_own_headers(
    proxy: ProxyFactory, sockets: tuple[SocketUpstream, str], script: Path
) -> None:
    fake, upstream_url = sockets
    with (
        proxy(
            trajectory=[script],
            upstream=upstream_url + "?sid={session}",
            upstream_header=["x-tenant: t-{session}"],
        ) as url,  # fmt: skip
        _client(url, "ps") as sock,
    ):
        assert output_of(_scripted(sock))[0]["content"][0]["text"] == "live over a socket"
    (upgrade,) = fake.upgrades
    assert upgrade["x-tenant"] == "t-ps"
    assert fake.queries == ["sid=ps"]
