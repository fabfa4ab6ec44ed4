"""A 30 MB request does not freeze the proxy's other clients: it is read, parsed and decided in a
thread while another client's stream goes on. The proxy runs as its own process (`replay-proxy
serve`), so that this test's threads do not share its interpreter lock."""

from __future__ import annotations

import fcntl
import json
import queue
import select
import socket
import struct
import termios
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import orjson
from starlette.responses import StreamingResponse

from tests.e2e.test_cli import serving
from tests.helpers.agent import RECORDED, TASK
from tests.helpers.servers import FakeUpstream, Seen, running

ITEMS = 200_000  # assistant messages of 100 bytes: a 30 MB Responses body


@dataclass
class Ticker:
    """A stream the test drives: one event for each number put in `ticks`; None ends it."""

    ticks: queue.Queue[int | None] = field(default_factory=queue.Queue)

    def answer(self, seen: Seen) -> StreamingResponse:
        async def events() -> Any:
            while (tick := await anyio.to_thread.run_sync(self.ticks.get)) is not None:
                delta = {"choices": [{"index": 0, "delta": {"content": str(tick)}}]}
                yield b"data: " + orjson.dumps(delta) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")


def unsent(sock: socket.socket) -> int:
    """Bytes of ours the kernel has not yet had acknowledged by the peer."""
    return int(struct.unpack("i", fcntl.ioctl(sock, termios.TIOCOUTQ, b"\0\0\0\0"))[0])


def unread(sock: socket.socket) -> int:
    """Bytes waiting in the receive queue of the proxy's end of `sock`'s connection (Linux)."""
    ours, theirs = sock.getsockname()[1], sock.getpeername()[1]
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, queues = fields[1], fields[2], fields[4]
        if int(local.split(":")[1], 16) == theirs and int(remote.split(":")[1], 16) == ours:
            return int(queues.split(":")[1], 16)
    raise AssertionError("the proxy's end of the connection is not in /proc/net/tcp")


def test_a_30_mb_body_does_not_stop_another_clients_stream(tmp_path: Path) -> None:
    trajectory = tmp_path / "run.json"
    trajectory.write_text(json.dumps(RECORDED))
    items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    text = [{"type": "output_text", "text": "y" * 100}]
    items += [{"type": "message", "role": "assistant", "content": text}] * ITEMS
    tools = [{"type": "function", "name": "bash", "parameters": {}}]
    body = orjson.dumps({"model": "m", "input": items, "tools": tools})
    ticker = Ticker()
    fake = FakeUpstream(fallback=ticker.answer)
    received: list[str] = []
    with running(fake.app) as upstream, serving(
        "--upstream", upstream + "/v1", "--trajectory", str(trajectory),
        "--max-body-bytes", str(64 * 1024 * 1024), "--log-level", "warning",
    ) as url:  # fmt: skip
        done, flowing = threading.Event(), threading.Event()

        def stream() -> None:
            """Ask for the next event as soon as the last one arrived, until told to stop."""
            side = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "s"}]}
            with httpx.stream("POST", url + "/chat/completions", json=side, timeout=120) as r:
                ticker.ticks.put(0)
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        received.append(json.loads(line[6:])["choices"][0]["delta"]["content"])
                        flowing.set()
                        ticker.ticks.put(None if done.is_set() else len(received))

        streaming = threading.Thread(target=stream)
        streaming.start()
        assert flowing.wait(timeout=120)  # the other stream is under way
        host, port = url.removeprefix("http://").split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=120) as big:
            head = (
                "POST /v1/responses HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                "content-type: application/json\r\nx-session-affinity: big\r\n"
                f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
            )
            big.sendall(head.encode() + body[:-1])
            while unsent(big) or unread(big):  # until the proxy has read all but the last byte
                select.select([], [], [], 0.001)
            before = len(received)
            big.sendall(body[-1:])  # now the body is whole: read, parsed and decided
            select.select([big], [], [], 120)  # the answer comes once it is parsed and decided
            during = len(received) - before
            answer = b""
            while chunk := big.recv(65536):
                answer += chunk
        done.set()
        streaming.join(timeout=120)
    status, _, payload = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 404"), status  # the history is not the script's
    error = orjson.loads(payload)["error"]
    assert error["code"] == "replay_diverged" and error["replay"]["kind"] == "history"
    # the other stream went on while the big body was read and decided...
    # (measured: 18 to 330 events; none or one when the body was parsed on the event loop)
    assert during >= 3, f"only {during} events reached the other client meanwhile"
    # ...and arrived whole, in order
    assert received == [str(n) for n in range(len(received))] and len(received) > during
    assert len(fake.requests) == 1  # the big request never went upstream
