"""The proxy's side as an HTTP server, over real sockets: requests framed to smuggle a second one
past it, heads too large to keep, answers too large to copy, and the limits the flags set.

uvicorn's own protocol frames every request; these tests hold the proxy to what that gives, so
that a change of server or settings that loses it fails here.
"""

from __future__ import annotations

import gc
import hashlib
import json
import socket
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.responses import Response

from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)))
    sock.settimeout(30)  # a bound on a broken test, never a wait for something to happen
    return sock


def until_closed(sock: socket.socket) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


SMUGGLED = b"GET /v1/models/smuggled HTTP/1.1\r\nhost: x\r\n\r\n"


@pytest.mark.parametrize(
    "head_and_body",
    [
        # Content-Length and Transfer-Encoding both: which one ends the body decides what follows
        b"content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n" + SMUGGLED,
        b"content-length: 5\r\ncontent-length: 48\r\n\r\n{}   " + SMUGGLED,
        b"transfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n" + SMUGGLED,  # not a chunk size
        b"transfer-encoding: chunked\r\n\r\n-2\r\n{}\r\n0\r\n\r\n" + SMUGGLED,
        b"transfer-encoding: chunked, identity\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + SMUGGLED,
    ],
    ids=[
        "cl-and-te",
        "two-content-lengths",
        "chunk-size-not-hex",
        "negative-chunk",
        "te-not-last-chunked",
    ],
)
def test_a_request_framed_to_smuggle_another_gets_a_400_and_nothing_reaches_the_upstream(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], head_and_body: bytes
) -> None:
    fake, upstream_url = upstream
    with proxy(upstream=upstream_url) as url, connect(url) as sock:
        sock.sendall(b"POST /v1/models HTTP/1.1\r\nhost: x\r\n" + head_and_body)
        answer = until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 400"), answer[:100]
    assert answer.count(b"HTTP/1.1 ") == 1  # and the connection closed: nothing more was read
    assert fake.requests == []


def test_request_heads_of_20_mb_are_not_kept_once_their_connections_close(
    proxy: ProxyFactory,
) -> None:
    """With the cyclic garbage collector off, so that nothing is freed late: ten 20 MB heads must
    not add up (the hand-written server kept each until a cyclic collection). Each client reads
    its whole answer and closes, as HTTP clients do; a connection reset instead keeps its last
    head for --keep-alive-timeout (uvicorn's keep-alive timer: see docs/operations.md)."""
    head = b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-padding: " + b"a" * (20 * 2**20) + b"\r\n\r\n"
    with proxy() as url:
        gc.collect()
        gc.disable()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(10):
                with connect(url) as sock:
                    sock.sendall(head)
                    answer = whole_answer(sock)
                    assert answer.startswith(b"HTTP/1.1 200")
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
            gc.enable()
    # the last head or two may still be on their way out; ten would be 200 MB
    assert grown < 50 * 2**20, f"{grown / 2**20:.0f} MB kept"


def whole_answer(sock: socket.socket) -> bytes:
    """One whole answer with a content-length, read off the socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


@pytest.fixture
def big_answer() -> Iterator[tuple[bytes, str]]:
    """A 100 MB JSON answer (a sized body), and its digest."""
    filler = b"x" * (100 * 2**20)
    body = (
        b'{"id":"big","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"'
        + filler
        + b'"},"finish_reason":"stop"}]}'
    )
    yield body, hashlib.sha256(body).hexdigest()


def test_a_100_mb_answer_is_passed_on_whole_while_others_are_served_and_not_copied_past_the_limit(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    big_answer: tuple[bytes, str],
    tmp_path: Path,
) -> None:
    fake, upstream_url = upstream
    body, digest = big_answer
    fake.then(lambda seen: Response(body, media_type="application/json"))
    request = {"model": "m", "messages": [{"role": "user", "content": "big"}]}
    with proxy(upstream=upstream_url, record_dir=tmp_path) as url:
        root = url.removesuffix("/v1")
        with httpx.stream(
            "POST", url + "/chat/completions", json=request, headers={"x-session-affinity": "big"}
        ) as r:
            pieces = r.iter_raw(2**20)
            received = hashlib.sha256(next(pieces))
            size = 2**20
            # mid-answer, the proxy serves others
            assert httpx.get(root + "/healthz", timeout=30).status_code == 200
            for piece in pieces:
                received.update(piece)
                size += len(piece)
    assert r.status_code == 200 and size == len(body) and received.hexdigest() == digest
    [line] = (tmp_path / "big.jsonl").read_text().splitlines()
    recorded = json.loads(line)
    assert recorded["status"] == 200 and recorded["response"] is None
    assert "more than --max-body-bytes" in recorded["error"] and len(line) < 10_000


def test_an_answer_of_some_megabytes_under_the_limit_is_recorded_whole(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    fake, upstream_url = upstream
    content = "y" * (3 * 2**20)
    completion = {
        "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }  # fmt: skip
    fake.then(lambda seen: Response(json.dumps(completion), media_type="application/json"))
    request = {"model": "m", "messages": [{"role": "user", "content": "some"}]}
    with proxy(upstream=upstream_url, record_dir=tmp_path) as url:
        r = httpx.post(
            url + "/chat/completions", json=request, headers={"x-session-affinity": "some"}
        )
    assert r.json() == completion
    [line] = (tmp_path / "some.jsonl").read_text().splitlines()
    recorded = json.loads(line)
    assert recorded["response"] == completion and recorded["error"] is None
    assert recorded["message"]["content"] == content


def test_an_idle_client_connection_is_closed_after_the_keep_alive_timeout(
    proxy: ProxyFactory,
) -> None:
    with proxy(keep_alive_timeout=0.2) as url, connect(url) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        answer = until_closed(sock)  # returns once the server closes the idle connection
    assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"HTTP/1.1 ") == 1


def test_a_post_asking_to_upgrade_to_h2c_gets_a_400_that_says_so(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    """curl --http2 on an http:// URL: the server reads no body after such a head."""
    fake, upstream_url = upstream
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    with proxy(upstream=upstream_url) as url, connect(url) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"connection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\nhttp2-settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"
            b"content-length: %d\r\n\r\n" % len(body) + body
        )
        answer = whole_answer(sock)
    assert answer.startswith(b"HTTP/1.1 400")
    message = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]["message"]
    assert "'h2c'" in message and "--http1.1" in message
    assert fake.requests == []
