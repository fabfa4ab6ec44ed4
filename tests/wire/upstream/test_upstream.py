"""The proxy's side as an HTTP client, over real sockets: what an upstream sends that a
well-behaved server would not, and what of the caller's request may reach the upstream.

Each case is one that crossed answers between callers, split a request, or sent a POST twice in
the hand-written client this proxy once had; the raw upstream (tests.helpers.servers.RawUpstream) writes
the exact bytes, and reads the exact request line.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trustme

from proxy.testing import serving
from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, RawConnection, RawUpstream, http_answer, text

BODY = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
JSON = {"content-type": "application/json"}


def post(url: str, body: bytes = BODY) -> httpx.Response:
    return httpx.post(url + "/chat/completions", content=body, headers=JSON, timeout=30)


def answering(
    before: bytes = b"", after: Callable[[RawConnection, int], None] | None = None
) -> Callable[[RawConnection], None]:
    """A script: every request gets `before` (informational answers), then a JSON answer naming
    its number; `after(conn, n)` runs once it is sent."""
    count = iter(range(1, 1000))

    def script(conn: RawConnection) -> None:
        while conn.read_request() is not None:
            n = next(count)
            conn.send(before + http_answer(b'{"answer": %d}' % n))
            if after is not None:
                after(conn, n)

    return script


def raw_exchange(url: str, data: bytes) -> bytes:
    """Send bytes to the proxy on a connection of their own; everything it answers until it
    closes (each request asks for that)."""
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(data)
        out = b""
        while chunk := sock.recv(65536):
            out += chunk
    return out


# ---- informational answers and bytes out of turn


def test_an_expect_100_continue_request_is_answered_once_and_never_crosses_to_the_next(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    """curl adds Expect: 100-continue to POST bodies over 1 MB; an upstream under uvicorn would
    answer 100 first if the proxy passed the header on."""
    fake, upstream_url = upstream
    fake.then(text("answer one"), text("answer two"))
    body = b'{"model":"m","messages":[{"role":"user","content":"%s"}]}' % (b"x" * 1_100_000)
    with proxy(upstream=upstream_url) as url:
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                b"expect: 100-continue\r\nconnection: close\r\ncontent-length: %d\r\n\r\n"
                % len(body)
            )
            assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")  # as curl waits for
            sock.sendall(body)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        second = post(url)
    assert answer.startswith(b"HTTP/1.1 200") and b"answer one" in answer
    assert b"100 Continue" not in answer
    assert second.json()["choices"][0]["message"]["content"] == "answer two"
    assert [("expect" in seen.headers) for seen in fake.requests] == [False, False]


@pytest.mark.parametrize(
    "informational",
    [
        b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\n",  # unsolicited: the proxy never sends Expect
    ],
    ids=["103-early-hints", "unsolicited-100"],
)
def test_an_informational_answer_is_skipped_and_each_caller_gets_its_own(
    proxy: ProxyFactory, informational: bytes
) -> None:
    with RawUpstream(answering(before=informational)) as up, proxy(upstream=up.url) as url:
        answers = [post(url) for _ in range(3)]
    assert [(a.status_code, a.json()) for a in answers] == [(200, {"answer": n}) for n in (1, 2, 3)]
    assert all(b"103" not in a.content and b"Continue" not in a.content for a in answers)
    assert up.connections == 1  # and the connection stayed in the pool, in step


def test_an_answer_sent_on_an_idle_pooled_connection_never_reaches_the_next_caller(
    proxy: ProxyFactory,
) -> None:
    go, sent = threading.Event(), threading.Event()

    def stale(conn: RawConnection, n: int) -> None:
        if n == 1:  # once the first caller has its answer, speak out of turn on the idle line
            assert go.wait(30)
            conn.send(http_answer(b'{"answer": "STALE"}'))
            sent.set()

    with RawUpstream(answering(after=stale)) as up, proxy(upstream=up.url) as url:
        first = post(url)
        go.set()
        assert sent.wait(30)  # the stale bytes are in the proxy's socket before it is asked again
        second = post(url)
    assert first.json() == {"answer": 1}
    assert second.json() == {"answer": 2} and b"STALE" not in second.content
    assert up.connections == 2  # the spoiled connection was closed, not reused


def test_an_upstream_switching_protocols_or_sending_a_status_over_599_gets_a_502(
    proxy: ProxyFactory,
) -> None:
    answers = iter(
        [
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n",
            b"HTTP/1.1 600 Beyond\r\ncontent-length: 2\r\n\r\nno",
        ]
    )

    def script(conn: RawConnection) -> None:
        if conn.read_request() is not None:
            conn.send(next(answers))

    with RawUpstream(script) as up, proxy(upstream=up.url) as url:
        switched, beyond = post(url), post(url)
    for r, status in ((switched, "101"), (beyond, "600")):
        assert r.status_code == 502 and r.headers["x-should-retry"] == "false"
        error = r.json()["error"]
        assert error["code"] == "upstream_bad_answer" and f"status {status}" in error["message"]


def test_headers_the_upstreams_connection_header_names_are_not_passed_on(
    proxy: ProxyFactory,
) -> None:
    hop = (
        b"connection: keep-alive, x-hop-secret\r\nx-hop-secret: for the proxy only\r\nx-kept: 1\r\n"
    )

    def script(conn: RawConnection) -> None:
        while conn.read_request() is not None:
            conn.send(http_answer(b"{}", headers=hop))

    with RawUpstream(script) as up, proxy(upstream=up.url) as url:
        r = post(url)
    assert r.status_code == 200 and r.headers["x-kept"] == "1"
    assert "x-hop-secret" not in r.headers


# ---- a request is sent once


def test_an_upstream_that_closes_after_reading_a_post_gets_it_once_and_the_caller_a_502(
    proxy: ProxyFactory,
) -> None:
    def script(conn: RawConnection) -> None:
        if conn.read_request() is not None:  # the first request on a connection is answered
            conn.send(http_answer(b'{"answer": 1}'))
        conn.read_request()  # the second is read, and the connection closed unanswered

    with RawUpstream(script) as up, proxy(upstream=up.url) as url:
        first = post(url)
        second = post(url)
    assert first.json() == {"answer": 1}
    assert second.status_code == 502
    assert "closed the connection without answering" in second.json()["error"]["message"]
    assert "not sent again" in second.json()["error"]["message"]
    assert len(up.requests) == 2 and up.connections == 1  # never a second copy, anywhere


# ---- the target as the caller sent it


@pytest.mark.parametrize(
    "target",
    [
        # a request line of the caller's choosing, were %0d%0a decoded on the way
        "/v1/models%20HTTP/1.1%0d%0aHost:%20x%0d%0a%0d%0aGET%20/v1/secret",
        "/v1/files/a%2Fb%3Fc%23d%C3%A9/content?after=x%26y&q=%3F",
        "/v1/models/v%2e1%2e%2e%2fadmin",  # encoded dots inside a segment: no "." or ".." one
    ],
)
def test_a_percent_encoded_target_goes_upstream_exactly_as_it_came(
    proxy: ProxyFactory, target: str
) -> None:
    with (
        RawUpstream(answering()) as up,
        proxy(upstream=up.url, upstream_api_key="sk-operator") as url,
    ):
        answer = raw_exchange(
            url, f"GET {target} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n".encode()
        )
    assert answer.startswith(b"HTTP/1.1 200")
    [only] = up.requests  # one request: nothing was split off it
    assert only.target == target and only.method == "GET"


def test_a_target_with_a_dot_segment_never_reaches_the_upstream(proxy: ProxyFactory) -> None:
    # a server that resolves it would take the request out of the base path (issue 42)
    with RawUpstream(answering()) as up, proxy(upstream=up.url) as url:
        for bad in (b"/v1/models/%2e%2e%2fadmin", b"/v1/../admin", b"/v1/%2E/models"):
            head = b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
            answer = raw_exchange(url, b"GET " + bad + head)
            assert answer.startswith(b"HTTP/1.1 400"), answer[:80]
            assert b"segment" in answer and bad in answer
    assert up.requests == []


def test_a_target_with_a_space_or_a_control_character_never_reaches_the_upstream(
    proxy: ProxyFactory,
) -> None:
    with RawUpstream(answering()) as up, proxy(upstream=up.url) as url:
        for bad in (b"/v1/models\rx", b"/v1/models\x01", b"/v1/mo dels x"):
            answer = raw_exchange(url, b"GET " + bad + b" HTTP/1.1\r\nhost: x\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 400"), answer[:80]
    assert up.requests == []


# ---- what the environment says: CA bundles and forward proxies


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", *PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


PROXY_VARIABLES = [
    f"{name}_proxy" if lower else f"{name.upper()}_PROXY"
    for name in ("http", "https", "all", "no")
    for lower in (True, False)
]


def test_an_https_upstream_signed_by_a_private_ca_needs_ssl_cert_file(
    proxy: ProxyFactory, tmp_path: Path, clean_environment: pytest.MonkeyPatch
) -> None:
    ca = trustme.CA()
    server = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(server))
    bundle = tmp_path / "private-ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    fake = FakeUpstream().then(text("over TLS"))
    with serving(fake.app, ssl_certfile=str(server), ssl_keyfile=str(server)) as root:
        assert root.startswith("https://")
        with proxy(upstream=root + "/v1") as url:
            untrusted = post(url)
        clean_environment.setenv("SSL_CERT_FILE", str(bundle))
        with proxy(upstream=root + "/v1") as url:
            trusted = post(url)
    assert untrusted.status_code == 502
    message = untrusted.json()["error"]["message"]
    assert "certificate" in message and "SSL_CERT_FILE" in message and root in message
    assert trusted.status_code == 200
    assert trusted.json()["choices"][0]["message"]["content"] == "over TLS"
    assert len(fake.requests) == 1


def test_an_upstream_is_reached_through_the_forward_proxy_http_proxy_names(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    forward_proxy: str,
    clean_environment: pytest.MonkeyPatch,
) -> None:
    fake, upstream_url = upstream
    clean_environment.setenv("HTTP_PROXY", forward_proxy)
    with proxy(upstream=upstream_url) as url, httpx.Client(trust_env=False) as client:
        through = client.post(url + "/chat/completions", content=BODY, headers=JSON)
    clean_environment.setenv("NO_PROXY", "127.0.0.1")
    with proxy(upstream=upstream_url) as url, httpx.Client(trust_env=False) as client:
        direct = client.post(url + "/chat/completions", content=BODY, headers=JSON)
    assert through.status_code == direct.status_code == 200
    first, second = fake.requests
    assert "tinyproxy" in first.headers.get("via", "")  # it went through the forward proxy
    assert "tinyproxy" not in second.headers["via"]  # NO_PROXY names the upstream: straight there


def test_a_forward_proxy_that_cannot_be_reached_is_named_in_a_502(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], clean_environment: pytest.MonkeyPatch
) -> None:
    fake, upstream_url = upstream
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://user:secret@127.0.0.1:{s.getsockname()[1]}"
    clean_environment.setenv("http_proxy", dead)
    with proxy(upstream=upstream_url) as url, httpx.Client(trust_env=False) as client:
        r = client.post(url + "/chat/completions", content=BODY, headers=JSON)
    message = r.json()["error"]["message"]
    assert r.status_code == 502 and "forward proxy" in message and "secret" not in message
    assert fake.requests == []
