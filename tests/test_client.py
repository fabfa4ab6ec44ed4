"""The forwarding client against raw upstream servers on real sockets: framing, keep-alive,
flow control and every way an answer can go wrong."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from proxy.client import HIGH_WATER, Broken, ConnectFailed, Pool, TimedOut

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


async def _serve(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()


def _pool(url: str, **timeouts: float) -> Pool:
    return Pool(
        url,
        connect_timeout=timeouts.get("connect", 5.0),
        read_timeout=timeouts.get("read", 30.0),
        total_timeout=timeouts.get("total"),
    )


async def _body(pool: Pool, target: str = "/v1/x", method: str = "POST") -> tuple[int, bytes]:
    answer = await pool.request(method, target, [], b"{}")
    try:
        return answer.status, b"".join([chunk async for chunk in answer.chunks()])
    finally:
        answer.close()


async def test_sized_chunked_and_until_close_bodies_and_keep_alive_reuse() -> None:
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nsized")
        await _read_request(reader)
        writer.write(b"HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(b"3\r\nchu\r\n4\r\nnked\r\n0\r\n\r\n")
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil close")
        await writer.drain()
        writer.close()

    async def head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)  # HEAD: the length of a body that is not sent
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n")
        await writer.drain()

    async for url in _serve(handler):
        pool = _pool(url)
        assert await _body(pool) == (200, b"sized")
        assert await _body(pool) == (201, b"chunked")  # the same connection, kept alive
        assert await _body(pool) == (200, b"until close")
        assert connections == 1 and not pool.idle  # a closed connection is not kept
    async for url in _serve(head):
        pool = _pool(url, read=30)
        assert await _body(pool, method="HEAD") == (200, b"")  # not a wait for 5 bytes


async def test_a_kept_alive_connection_the_upstream_closed_is_replaced_without_resending() -> None:
    seen = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        await _read_request(reader)
        seen += 1
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()  # closes the kept-alive connection without saying so

    async for url in _serve(handler):
        pool = _pool(url)
        assert await _body(pool) == (200, b"ok")
        # whether or not the close has arrived yet, the next request must not fail
        assert await _body(pool) == (200, b"ok")
        assert seen == 2  # each request reached the upstream exactly once


async def test_refused_and_timeouts_are_their_own_errors() -> None:
    with pytest.raises(ConnectFailed):
        await _body(_pool("http://127.0.0.1:9/v1"))
    stop = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await stop.wait()
        writer.close()

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        while not stop.is_set():  # a byte at a time, forever: never idle, never done
            writer.write(b"1\r\n.\r\n")
            await writer.drain()
            await asyncio.sleep(0.01)
        writer.close()

    async def answers_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await silent(reader, writer)

    try:
        async for url in _serve(silent):
            with pytest.raises(TimedOut, match=r"no data from the upstream for 0\.2 s"):
                await _body(_pool(url, read=0.2))
        async for url in _serve(answers_once):
            pool = _pool(url, read=0.2)
            assert await _body(pool) == (200, b"ok")
            assert len(pool.idle) == 1  # kept alive, its read timer still armed from that answer
            with pytest.raises(TimedOut, match=r"no data from the upstream for 0\.2 s"):
                await _body(pool)  # the same connection, silent now
        async for url in _serve(trickle):
            with pytest.raises(TimedOut, match=r"no whole answer within 0\.3 s"):
                await _body(_pool(url, read=5, total=0.3))
    finally:
        stop.set()


async def test_a_body_cut_short_and_garbage_are_broken() -> None:
    async def short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly this")
        await writer.drain()
        writer.close()

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()

    async for url in _serve(short):
        with pytest.raises(Broken, match="closed the connection"):
            await _body(_pool(url))
    async for url in _serve(garbage):
        with pytest.raises(Broken, match="not HTTP"):
            await _body(_pool(url))


async def test_a_reader_that_stops_stops_the_upstream_instead_of_queueing_its_answer() -> None:
    total = 64 * 1024 * 1024
    written = 0
    done = asyncio.Event()

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal written
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % total)
        block = b"x" * 65536
        try:
            while written < total:
                writer.write(block)
                written += len(block)
                await writer.drain()
        except ConnectionError:
            pass
        done.set()

    async for url in _serve(flood):
        pool = _pool(url)
        answer = await pool.request("POST", "/v1/x", [], b"{}")
        conn = answer.conn
        assert conn is not None
        while not conn.paused and not conn.complete:  # nobody takes the body out
            await conn.wait(30)
        assert conn.paused and not conn.complete
        assert conn.queued < HIGH_WATER + 1024 * 1024  # bounded: one read past the mark at most
        received = 0
        async for chunk in answer.chunks():  # reading again resumes it, to the last byte
            received += len(chunk)
        answer.close()
        await done.wait()
        assert received == total == written


async def test_a_relayed_body_arrives_whole_when_sends_must_wait_and_are_not_coroutines() -> None:
    from proxy.relay import Relay

    pieces = [b"piece %d;" % i for i in range(200)]

    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for piece in pieces:
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def relay_from(url: str) -> None:
        loop = asyncio.get_running_loop()
        pool = _pool(url)
        answer = await pool.request("POST", "/v1/x", [], b"{}")
        conn = answer.conn
        assert conn is not None
        sent: list[bytes] = []
        paused_while_waiting: list[bool] = []

        def send(message: dict[str, Any]) -> asyncio.Future[None]:
            # an awaitable that is not a coroutine; every other one is not done yet, as when the
            # client's socket is full
            sent.append(message["body"])
            done: asyncio.Future[None] = loop.create_future()
            if len(sent) % 2:
                done.set_result(None)
            else:
                loop.call_soon(lambda: paused_while_waiting.append(conn.paused))
                loop.call_soon(done.set_result, None)
            return done

        relay = Relay(answer, send)  # type: ignore[arg-type]
        await relay.finished
        await relay.close()
        answer.close()
        assert b"".join(sent) == b"".join(pieces)  # in order, nothing lost or repeated
        assert paused_while_waiting and all(paused_while_waiting)  # no reading while one waits
        assert relay.first_byte is not None
        assert len(pool.idle) == 1  # the whole answer was read: the connection is kept

    async for url in _serve(chunked):
        await relay_from(url)


async def test_a_client_slower_than_the_read_timeout_does_not_time_the_upstream_out() -> None:
    from proxy.relay import Relay

    first_taken = asyncio.Event()

    async def two_pieces(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await first_taken.wait()  # the second piece comes while the proxy is not reading
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await writer.drain()

    async def relay_from(url: str) -> None:
        loop = asyncio.get_running_loop()
        answer = await _pool(url, read=0.3).request("POST", "/v1/x", [], b"{}")
        sent: list[bytes] = []

        def send(message: dict[str, Any]) -> asyncio.Future[None]:
            # the first piece takes the client three read timeouts to take: the proxy stopped
            # reading meanwhile, which is no silence of the upstream's
            sent.append(message["body"])
            first_taken.set()
            done: asyncio.Future[None] = loop.create_future()
            loop.call_later(1.0 if len(sent) == 1 else 0, done.set_result, None)
            return done

        relay = Relay(answer, send)  # type: ignore[arg-type]
        await relay.finished
        await relay.close()
        answer.close()
        assert b"".join(sent) == b"firstsecond"

    async for url in _serve(two_pieces):
        await relay_from(url)
