"""What a client sees when the upstream or the client misbehaves, and what bad input gets: all
over real sockets, against a fake upstream that fails on purpose."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from starlette.responses import StreamingResponse

from tests.conftest import ProxyFactory
from tests.helpers.agent import TOOLS, client, start_messages
from tests.helpers.servers import (
    FakeUpstream,
    drop_after_first_event,
    hang,
    raw,
    stall_after_first_event,
    status,
    text,
)

STREAM = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture
def released() -> Iterator[threading.Event]:
    """Set when the test ends, so that a hanging fake upstream lets go."""
    event = threading.Event()
    yield event
    event.set()


# ---- upstream faults


def test_dns_failure_is_a_502_naming_the_upstream_without_its_credentials(
    proxy: ProxyFactory,
) -> None:
    with proxy(upstream="http://user:hunter2@no-such-host.invalid/v1") as url:
        r = httpx.post(url + "/chat/completions", json=STREAM)
    assert r.status_code == 502 and r.headers["x-should-retry"] == "false"
    assert "no-such-host.invalid" in r.json()["error"]["message"] and "hunter2" not in r.text


@pytest.mark.parametrize("code", [500, 503, 429])
def test_upstream_errors_pass_through_unchanged_with_their_headers(
    code: int, proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    fake.then(
        status(
            code,
            {"error": {"message": f"upstream says {code}"}},
            {"retry-after": "3", "x-request-id": "up-1"},
        )
    )
    with proxy(upstream=upstream_url) as url:
        r = httpx.post(url + "/chat/completions", json=STREAM)
    assert r.status_code == code
    assert (r.headers["retry-after"], r.headers["x-request-id"]) == ("3", "up-1")
    assert "x-should-retry" not in r.headers  # the client's own retry logic decides
    assert r.json() == {"error": {"message": f"upstream says {code}"}}


def test_an_upstream_that_never_answers_gets_a_504(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], released: threading.Event
) -> None:
    fake, upstream_url = upstream
    fake.then(hang(released))
    with proxy(upstream=upstream_url, read_timeout=0.5) as url:
        r = httpx.post(url + "/chat/completions", json={**STREAM, "stream": False}, timeout=30)
    assert r.status_code == 504 and "did not answer in time" in r.json()["error"]["message"]


def test_a_stream_that_stalls_ends_with_an_error_event(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], released: threading.Event
) -> None:
    fake, upstream_url = upstream
    fake.then(stall_after_first_event(released))
    with (
        proxy(upstream=upstream_url, read_timeout=0.5) as url,
        httpx.stream("POST", url + "/chat/completions", json=STREAM, timeout=30) as r,
    ):
        lines = [line for line in r.iter_lines() if line]
    assert lines[0].startswith('data: {"choices"')
    error = json.loads(lines[-1].removeprefix("data: "))["error"]
    assert error["code"] == "upstream_stream_broken" and "broke off" in error["message"]


def test_a_dropped_stream_ends_with_an_error_event_the_sdk_raises_and_the_recording_marks(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    fake, upstream_url = upstream
    fake.then(drop_after_first_event())
    with proxy(upstream=upstream_url, record_dir=tmp_path) as url:
        c = client(url, **{"x-session-affinity": "drop-1"})
        with pytest.raises(openai.APIError, match="broke off"):
            for _ in c.chat.completions.create(model="m", messages=start_messages(), stream=True):
                pass
    [line] = (tmp_path / "drop-1.jsonl").read_text().splitlines()
    assert "broke off" in json.loads(line)["error"]


def test_malformed_sse_is_passed_through_as_it_came(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    odd = (
        b'data: {not json at all\n\nevent: whatever\ndata: ["x"\n\n: a comment\n\ndata: [DONE]\n\n'
    )
    fake.then(raw(odd, "text/event-stream"))
    with proxy(upstream=upstream_url) as url:
        r = httpx.post(url + "/chat/completions", json=STREAM)
    assert r.status_code == 200 and r.content == odd


def test_unknown_fields_are_forwarded_byte_for_byte(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    body = b'{"model":"m","messages":[{"role":"user","content":"hi","x_custom":[1,{"a":null}]}],"vendor_flag":{"deep":true},  "n":1}'
    with proxy(upstream=upstream_url) as url:
        httpx.post(
            url + "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
    assert fake.posts()[0].body == body


# ---- client faults


def test_many_idle_keep_alive_connections_do_not_get_in_the_way(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    from tests.helpers.agent import RECORDED

    with proxy(trajectory=[write_trajectory(RECORDED)]) as url:
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        idle = [socket.create_connection((host, int(port))) for _ in range(300)]
        try:
            answer = client(url, **{"x-session-affinity": "busy"}).chat.completions.create(
                model="m", messages=start_messages(), tools=TOOLS
            )
            assert answer.choices[0].message.tool_calls
        finally:
            for s in idle:
                s.close()


def test_a_slow_reader_gets_every_byte_and_holds_up_no_one(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    from tests.helpers.agent import RECORDED

    fake, upstream_url = upstream
    events, size = 1000, 8192
    # set once the upstream has sent more than the proxy queues (256 KiB), its write buffer
    # (64 KiB) and the sockets' initial buffers hold: the proxy is now holding a stuck stream
    plenty = threading.Event()

    def big(seen: Any) -> StreamingResponse:
        async def stream() -> Any:
            for i in range(events):
                if i * size > 384 * 1024:
                    plenty.set()
                yield b"data: " + str(i).encode().rjust(size, b"0") + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    fake.then(big)
    body = json.dumps(STREAM).encode()
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RECORDED)]) as url:
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        with socket.create_connection((host, int(port))) as slow:
            slow.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
                b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body) + body
            )
            # the slow reader reads nothing while another session is served
            assert plenty.wait(timeout=30)
            answer = client(url, **{"x-session-affinity": "fast"}).chat.completions.create(
                model="m", messages=start_messages(), tools=TOOLS
            )
            assert answer.choices[0].message.tool_calls
            late = http.client.HTTPResponse(slow)  # now it reads it all
            late.begin()
            received = late.read()
    assert late.status == 200
    found = [line for line in received.split(b"\n") if line.startswith(b"data: ")]
    assert len(found) == events + 1 and found[-1] == b"data: [DONE]"
    assert found[:-1] == [b"data: " + str(i).encode().rjust(size, b"0") for i in range(events)]


# ---- bad input


@pytest.mark.parametrize(
    ("body", "status_code", "fragment"),
    [
        (b"[" * 2000 + b"]" * 2000, 400, "nested more than 250 levels"),  # past the parser, too
        (b'{"messages": [], "model": "m"}' + b" " * 5000, 413, "limit"),
        (b'{"messages": "no"}', 400, "'messages' must be an array"),
        (b'{"model": ["m"], "messages": []}', 400, "'model' must be a string"),
        (b"\xff\xfe not even text", 400, "not valid JSON"),
    ],
)
def test_bad_input_gets_a_clear_4xx(
    proxy: ProxyFactory, body: bytes, status_code: int, fragment: str
) -> None:
    with proxy(max_body_bytes=4096) as url:
        r = httpx.post(
            url + "/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        still = httpx.get(url.removesuffix("/v1") + "/healthz")
    assert r.status_code == status_code and fragment in r.json()["error"]["message"]
    assert r.json()["error"]["type"] == "invalid_request_error" and still.status_code == 200


def test_a_later_answer_after_upstream_faults_is_still_right(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    fake.then(drop_after_first_event(), status(500, {"error": {"message": "boom"}}), text("fine"))
    with proxy(upstream=upstream_url) as url:
        with httpx.stream("POST", url + "/chat/completions", json=STREAM) as r:
            list(r.iter_lines())
        assert httpx.post(url + "/chat/completions", json=STREAM).status_code == 500
        ok = httpx.post(url + "/chat/completions", json={**STREAM, "stream": False})
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "fine"
