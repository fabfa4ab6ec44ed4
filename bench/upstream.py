"""A fast fake OpenAI upstream: a raw asyncio HTTP/1.1 server (uvloop), so that it is never what
limits a benchmark. Keep-alive; every POST is answered as a chat completion:

- `"stream": true` in the body: `chunks` SSE events, then [DONE], one write (one TCP segment)
  each; with `delay` > 0 one event every `delay` seconds (all open streams are fed by one timer);
- otherwise a ~300-byte chat.completion.

    python -m bench.upstream --port 9100 --chunks 64 --delay 0
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

import uvloop

JSON_BODY = (
    b'{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"bench",'
    b'"choices":[{"index":0,"message":{"role":"assistant","content":"The quick brown fox jumps over '
    b'the lazy dog."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":10,'
    b'"total_tokens":22}}'
)
CHUNK = b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1,"model":"bench","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n'
DONE = b"data: [DONE]\n\n"
JSON_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    % len(JSON_BODY)
)
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Upstream(asyncio.Protocol):
    def __init__(self, chunks: int, delay: float, pacer: Pacer) -> None:
        self.chunks, self.delay, self.pacer = chunks, delay, pacer
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.pacer.forget(self)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                length = int(head[at + 15 :].split(b"\r\n", 1)[0])
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            self.answer(b'"stream":true' in body or b'"stream": true' in body)

    def answer(self, stream: bool) -> None:
        assert self.transport is not None
        if not stream:
            self.transport.write(JSON_HEAD + JSON_BODY)
        elif self.delay <= 0:  # one write (one TCP segment) per event, as a token stream comes
            self.transport.write(SSE_HEAD)
            piece = chunked(CHUNK)
            for _ in range(self.chunks):
                self.transport.write(piece)
            self.transport.write(chunked(DONE) + b"0\r\n\r\n")
        else:
            self.transport.write(SSE_HEAD)
            self.pacer.add(self, self.chunks)


class Pacer:
    """Feeds every paced stream one event per tick, from one timer (cheap at thousands of streams)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.streams: dict[Upstream, int] = {}

    def add(self, stream: Upstream, chunks: int) -> None:
        self.streams[stream] = chunks

    def forget(self, stream: Upstream) -> None:
        self.streams.pop(stream, None)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        tick = loop.time()
        while True:
            tick += self.delay
            await asyncio.sleep(max(0.0, tick - loop.time()))
            for stream, left in list(self.streams.items()):
                transport = stream.transport
                if transport is None or transport.is_closing():
                    self.streams.pop(stream, None)
                    continue
                if left > 0:
                    transport.write(chunked(CHUNK))
                    self.streams[stream] = left - 1
                else:
                    transport.write(chunked(DONE) + b"0\r\n\r\n")
                    self.streams.pop(stream, None)


async def serve(port: int, chunks: int, delay: float) -> None:
    loop = asyncio.get_running_loop()
    pacer = Pacer(delay)
    server = await loop.create_server(
        lambda: Upstream(chunks, delay, pacer), "127.0.0.1", port, backlog=4096
    )
    print(
        f"bench upstream listening on http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1",
        flush=True,
    )
    pacing = asyncio.create_task(pacer.run()) if delay > 0 else None
    try:
        await server.serve_forever()
    finally:
        if pacing is not None:
            pacing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pacing


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.upstream")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunks", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between two events")
    args = parser.parse_args()
    uvloop.run(serve(args.port, args.chunks, args.delay))


if __name__ == "__main__":
    main()
