"""Forwarded streams pass through as they arrive, a client that leaves closes the upstream, and
only end-to-end headers go upstream."""

from __future__ import annotations

import logging

import httpx
import pytest

from proxy.apis.keys import PLAIN
from proxy.upstream.headers import answer_headers, request_headers
from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, Gate, status

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


# with the upstream key set, only an end that may begin the key waits: an event's end never does
@pytest.mark.parametrize("key", [None, "sk-upstream-0123456789"])
def test_the_first_event_arrives_before_the_upstream_sends_the_rest(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], key: str | None
) -> None:
    fake, upstream_url = upstream
    gate = Gate()
    fake.then(gate.answer)
    try:
        with (
            proxy(upstream=upstream_url, upstream_api_key=key) as url,
            httpx.stream("POST", url + "/chat/completions", json=BODY) as r,
        ):
            lines = r.iter_lines()
            assert next(lines) == 'data: {"choices":[{"index":0,"delta":{"content":"first"}}]}'
            assert (
                not gate.released.is_set()
            )  # it came through while the upstream still held the rest
            gate.released.set()
            assert [line for line in lines if line] == ["data: [DONE]"]
    finally:
        gate.released.set()


def test_a_client_that_disconnects_closes_its_upstream_request(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], caplog: pytest.LogCaptureFixture
) -> None:
    fake, upstream_url = upstream
    gate = Gate()
    fake.then(gate.answer)
    try:
        with caplog.at_level(logging.WARNING), proxy(upstream=upstream_url) as url:
            with httpx.stream("POST", url + "/chat/completions", json=BODY) as r:
                assert next(r.iter_lines()).startswith("data: ")
            # the client has gone; the upstream stream must end without being released
            assert gate.closed.wait(timeout=20)
            assert not gate.released.is_set()
    finally:
        gate.released.set()
    # the server has stopped, so the answer's task is over: it ended quietly, as a client leaving
    # is no error of the proxy's
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_request_headers_drop_hop_by_hop_and_proxy_headers_and_swap_the_key() -> None:
    sent = [
        (b"connection", b"keep-alive, x-trace"),
        (b"x-trace", b"hop"),  # named in Connection: hop-by-hop too
        (b"keep-alive", b"timeout=5"),
        (b"host", b"proxy:8080"),
        (b"content-length", b"2"),
        (b"expect", b"100-continue"),  # the body is read already: an upstream 100 means nothing
        (b"te", b"trailers"),
        (b"x-replay-trajectory", b"t"),
        (b"accept-encoding", b"gzip"),
        (b"x-api-key", b"sk-client"),
        (b"user-agent", b"agent/1"),
    ]
    assert request_headers(sent, api_key=None, dialect=PLAIN) == [
        ("accept-encoding", "gzip"),
        ("x-api-key", "sk-client"),
        ("user-agent", "agent/1"),
    ]
    # with the proxy's own key, the client's is replaced the way that client sends it
    keyed = request_headers(sent, api_key="sk-up", identity=True, dialect=PLAIN)
    assert keyed == [
        ("user-agent", "agent/1"),
        ("accept-encoding", "identity"),
        ("x-api-key", "sk-up"),
    ]


def test_answer_headers_drop_hop_by_hop_and_what_connection_names() -> None:
    raw = [
        (b"Content-Type", b"text/event-stream"),
        (b"Connection", b"keep-alive, X-Upstream-Hop"),
        (b"X-Upstream-Hop", b"1"),
        (b"Transfer-Encoding", b"chunked"),
        (b"Date", b"Mon, 01 Jan 2026 00:00:00 GMT"),
        (b"x-request-id", b"up-1"),
    ]
    kept, content_type = answer_headers(raw)
    assert kept == [(b"Content-Type", b"text/event-stream"), (b"x-request-id", b"up-1")]
    assert content_type == "text/event-stream"


def test_a_forwarded_answer_has_one_date_and_the_upstreams_server_header(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    ok = {"choices": []}
    fake.then(status(200, ok, {"server": "llm-edge"}), status(200, ok, {"server": "llm-edge"}))
    direct = httpx.post(upstream_url + "/chat/completions", json=BODY)
    assert direct.headers.get_list("date")  # the upstream sends its own Date
    with proxy(upstream=upstream_url) as url:
        r = httpx.post(url + "/chat/completions", json=BODY)
    assert r.status_code == 200 and r.headers["x-replay-source"] == "upstream"
    assert len(r.headers.get_list("date")) == 1  # the proxy's, not also the upstream's
    assert r.headers.get_list("server") == ["llm-edge"]  # not also "uvicorn"
