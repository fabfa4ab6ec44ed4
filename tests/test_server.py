"""proxy.server.Protocol: the HTTP/1.1 server the proxy runs on, over real sockets.

Each test serves a small ASGI app under uvicorn with the protocol, and talks raw HTTP to it, so
what is asserted is the bytes on the wire: keep-alive, pipelining, 100-continue, chunked request
bodies, HEAD, bad requests, failing apps, Connection: close, the keep-alive timeout and a
graceful shutdown.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from proxy.server import Protocol
from proxy.testing import serving


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with the method, path, query and the whole request body."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    out = b"%s %s?%s %s" % (
        scope["method"].encode(),
        scope["path"].encode(),
        scope["query_string"],
        body,
    )
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(out))],
        }
    )
    await send({"type": "http.response.body", "body": out})


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.settimeout(10)  # a bound on a broken test, never a wait for something to happen
    return sock


def read_response(sock: socket.socket, buffer: bytearray) -> tuple[bytes, bytes]:
    """(head, body) of the next response: by content-length, or chunked, or to EOF."""
    while b"\r\n\r\n" not in buffer:
        data = sock.recv(65536)
        assert data, f"closed before a whole head: {bytes(buffer)!r}"
        buffer += data
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    del buffer[:end]
    lines = {
        line.split(b":", 1)[0].lower(): line.split(b":", 1)[1].strip()
        for line in head.split(b"\r\n")[1:]
        if b":" in line
    }
    if head.startswith(b"HTTP/1.1 100"):
        return head, b""
    if b"content-length" in lines:
        size = int(lines[b"content-length"])
        if head.startswith(b"HEAD") or size == 0:
            return head, b""
        while len(buffer) < size:
            data = sock.recv(65536)
            assert data, "closed before the whole body"
            buffer += data
        body = bytes(buffer[:size])
        del buffer[:size]
        return head, body
    assert lines.get(b"transfer-encoding") == b"chunked", head
    body = b""
    while True:
        while b"\r\n" not in buffer:
            buffer += sock.recv(65536)
        line_end = buffer.index(b"\r\n")
        size = int(buffer[:line_end], 16)
        while len(buffer) < line_end + 2 + size + 2:
            buffer += sock.recv(65536)
        body += bytes(buffer[line_end + 2 : line_end + 2 + size])
        del buffer[: line_end + 2 + size + 2]
        if size == 0:
            return head, body


def read_to_end(sock: socket.socket) -> bytes:
    """All the server sends until it closes the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def closed(sock: socket.socket) -> bool:
    """True once the server has closed the connection (reads EOF)."""
    return sock.recv(65536) == b""


def post(path: str, body: bytes, extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nhost: t\r\ncontent-length: {len(body)}\r\n{extra}\r\n".encode()
        + body
    )


def test_keep_alive_answers_requests_one_after_another_on_one_connection() -> None:
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        for i in range(3):
            sock.sendall(post(f"/n/{i}?q={i}", b"body-%d" % i))
            head, body = read_response(sock, buffer)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert b"\r\ndate: " in head  # uvicorn's default headers are kept
            assert body == b"POST /n/%d?q=%d body-%d" % (i, i, i)
        sock.close()


def test_pipelined_requests_are_answered_in_order() -> None:
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(b"".join(post(f"/p/{i}", b"x" * i) for i in range(1, 6)))
        bodies = [read_response(sock, buffer)[1] for _ in range(5)]
        assert bodies == [b"POST /p/%d? %s" % (i, b"x" * i) for i in range(1, 6)]
        sock.close()


def test_expect_100_continue_is_answered_before_the_body_is_sent() -> None:
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(
            b"POST /c HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\nexpect: 100-continue\r\n\r\n"
        )
        head, _ = read_response(sock, buffer)
        assert head == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        head, body = read_response(sock, buffer)
        assert head.startswith(b"HTTP/1.1 200") and body == b"POST /c? hello"
        sock.close()


def test_a_chunked_request_body_arrives_whole() -> None:
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(
            b"POST /chunked HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        )
        assert read_response(sock, buffer)[1] == b"POST /chunked? hello world"
        sock.close()


def test_a_body_larger_than_the_read_buffer_pauses_and_resumes_reading() -> None:
    big = bytes(range(256)) * 4096  # 1 MiB: reading pauses at 64 KiB until the app takes it
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(post("/big", big))
        assert read_response(sock, buffer)[1] == b"POST /big? " + big
        sock.close()


def test_head_gets_headers_and_no_body_and_the_connection_goes_on() -> None:
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(b"HEAD /h HTTP/1.1\r\nhost: t\r\n\r\n" + post("/after", b"ok"))
        while buffer.count(b"\r\n\r\n") < 2:
            buffer += sock.recv(65536)
        head_end = buffer.index(b"\r\n\r\n") + 4
        assert buffer.startswith(b"HTTP/1.1 200") and b"content-length: 9\r\n" in buffer[:head_end]
        del buffer[:head_end]  # no body follows a HEAD answer: the next bytes are the next answer
        assert read_response(sock, buffer)[1] == b"POST /after? ok"
        sock.close()


def test_a_request_that_is_not_http_gets_400_and_a_closed_connection() -> None:
    with serving(echo) as url:
        sock = connect(url)
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        data = read_to_end(sock)
        assert data.startswith(b"HTTP/1.1 400 Bad Request\r\ndate: ")
        assert data.endswith(b"\r\n\r\nInvalid HTTP request received.")
        sock.close()


def test_an_app_that_fails_before_answering_gets_a_500_and_a_closed_connection() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            raise ValueError("broken app")

    with serving(app) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(post("/", b""))
        head, body = read_response(sock, buffer)
        assert head.startswith(b"HTTP/1.1 500") and b"connection: close\r\n" in head
        assert body == b"Internal Server Error"
        assert closed(sock)


def test_an_app_that_fails_mid_answer_closes_the_connection_after_what_it_sent() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"partial", "more_body": True})
        raise ValueError("broken mid-answer")

    with serving(app) as url:
        sock = connect(url)
        sock.sendall(post("/", b""))
        data = read_to_end(sock)
        # chunked, cut off: the piece sent, and never the last chunk that would mark it whole
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"7\r\npartial\r\n")


def test_a_header_value_with_a_line_break_is_never_written() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"x-a", b"1\r\nx-b: 2")]}
        )
        await send({"type": "http.response.body", "body": b""})

    with serving(app) as url:
        sock = connect(url)
        sock.sendall(post("/", b""))
        assert closed(sock)  # no head with an injected header: the connection is closed


def test_connection_close_and_http_1_0_end_the_connection_after_the_answer() -> None:
    with serving(echo) as url:
        for request in (
            post("/close", b"a", "connection: close\r\n"),
            b"POST /old HTTP/1.0\r\ncontent-length: 1\r\n\r\nb",
        ):
            sock, buffer = connect(url), bytearray()
            sock.sendall(request)
            head, body = read_response(sock, buffer)
            assert head.startswith(b"HTTP/1.1 200") and b"connection: close\r\n" in head
            assert body.endswith((b" a", b" b"))
            assert closed(sock)


@contextmanager
def server(app: Any, **config: Any) -> Iterator[tuple[str, uvicorn.Server]]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    instance = uvicorn.Server(
        uvicorn.Config(app, log_config=None, lifespan="off", http=Protocol, **config)
    )
    thread = threading.Thread(target=instance.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", instance
    finally:
        instance.should_exit = True
        thread.join(timeout=30)
        sock.close()


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout_and_a_busy_one_is_not() -> None:
    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        await asyncio.sleep(0.6)  # the answer itself takes three keep-alive timeouts
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})

    with server(slow, timeout_keep_alive=0.2) as (url, _):
        sock, buffer = connect(url), bytearray()
        sock.sendall(post("/", b""))
        head, body = read_response(sock, buffer)  # not closed while busy
        assert head.startswith(b"HTTP/1.1 200") and body == b"done"
        assert closed(sock)  # then idle: closed by the timeout, without a request
        sock.close()


def test_shutdown_lets_the_request_in_progress_finish_and_then_closes() -> None:
    started = threading.Event()
    release: list[Any] = []

    async def held(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        go = asyncio.Event()
        release.append((asyncio.get_running_loop(), go))
        started.set()
        await go.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"finished"})

    with server(held) as (url, instance):
        sock, buffer = connect(url), bytearray()
        sock.sendall(post("/", b""))
        assert started.wait(10)
        loop, go = release[0]
        # what uvicorn's graceful shutdown does to each connection, then the app goes on (in
        # this order: the loop runs callbacks first in, first out)
        for connection in list(instance.server_state.connections):
            loop.call_soon_threadsafe(connection.shutdown)
        loop.call_soon_threadsafe(go.set)
        head, body = read_response(sock, buffer)
        assert head.startswith(b"HTTP/1.1 200") and body == b"finished"
        assert b"connection: close\r\n" in head
        assert closed(sock)
        sock.close()


def test_an_upgrade_request_is_answered_as_plain_http_and_the_connection_closed() -> None:
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(b"GET /u HTTP/1.1\r\nhost: t\r\nconnection: upgrade\r\nupgrade: h2c\r\n\r\n")
        head, body = read_response(sock, buffer)
        assert head.startswith(b"HTTP/1.1 200") and body == b"GET /u? "
        assert b"connection: close\r\n" in head  # the parser stops at an upgrade: no next request
        assert closed(sock)


def test_bytes_after_a_connection_close_request_do_not_spoil_its_answer() -> None:
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(post("/first", b"1", "connection: close\r\n") + post("/second", b"2"))
        head, body = read_response(sock, buffer)
        assert head.startswith(b"HTTP/1.1 200") and body == b"POST /first? 1"
        assert closed(sock)


def test_two_receivers_waiting_at_once_are_both_woken() -> None:
    woken: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()  # the whole (empty) body: the next receive waits for the end

        async def listen(name: str) -> None:
            message = await receive()
            woken.append(f"{name}:{message['type']}")

        listeners = [asyncio.ensure_future(listen(n)) for n in ("a", "b")]
        await asyncio.sleep(0)  # both are waiting now
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        await asyncio.gather(*listeners)
        woken.sort()

    with serving(app) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(post("/", b""))
        assert read_response(sock, buffer)[1] == b"ok"
        sock.close()
    assert woken == ["a:http.disconnect", "b:http.disconnect"]


def test_the_body_of_an_upgrade_request_is_read_as_curl_http2_sends_it() -> None:
    upgrade = (
        "connection: Upgrade, HTTP2-Settings\r\nupgrade: h2c\r\n"
        "http2-settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
    )
    with serving(echo) as url:
        sock, buffer = connect(url), bytearray()
        sock.sendall(post("/h2c", b'{"a": 1}', upgrade))  # what curl --http2 -d sends
        head, body = read_response(sock, buffer)
        assert head.startswith(b"HTTP/1.1 200") and body == b'POST /h2c? {"a": 1}'
        assert closed(sock)
        sock, buffer = connect(url), bytearray()
        sock.sendall(
            f"POST /h2c HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n{upgrade}\r\n".encode()
        )
        sock.sendall(b"3\r\nabc\r\n0\r\n\r\n")  # the body apart from the head
        assert read_response(sock, buffer)[1] == b"POST /h2c? abc"
        assert closed(sock)


def test_an_app_returning_a_value_after_its_head_still_sends_that_head() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] != "http":
            return None
        await send({"type": "http.response.start", "status": 200, "headers": []})
        return "not None"

    with serving(app) as url:
        sock = connect(url)
        sock.sendall(post("/", b""))
        data = read_to_end(sock)
        assert data.startswith(b"HTTP/1.1 200 OK\r\n") and data.endswith(b"\r\n\r\n")
