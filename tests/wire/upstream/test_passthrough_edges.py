"""A forwarded answer's edges over real sockets: the proxy's upstream key split between two reads
is still masked, and a stream's end marker counts only at the start of a line.

The raw upstream writes each piece once the client has seen what proves the proxy read the one
before, so the pieces reach the proxy as separate reads (threading.Event, never a sleep).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.responses import Response, StreamingResponse

from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, RawConnection, RawUpstream, Seen

KEY = b"sk-upstream-key-0123456789"
HALF = len(KEY) // 2
STARS = b"*" * len(KEY)
SESSION = "edge-1"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def event(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def delta(content: str) -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]})


FINISH = event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def in_steps(content_type: bytes, pieces: list[bytes], gates: list[threading.Event]) -> RawUpstream:
    """An upstream answering one request with a chunked body: the head and pieces[0] at once,
    then each further piece once its gate (gates[i] for pieces[i + 1]) is set."""

    def script(conn: RawConnection) -> None:
        if conn.read_request() is None:
            return
        head = b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n"
        conn.send(head % content_type + chunked(pieces[0]))
        for gate, piece in zip(gates, pieces[1:], strict=True):
            assert gate.wait(30)
            conn.send(chunked(piece))
        conn.send(b"0\r\n\r\n")

    return RawUpstream(script)


def receive(r: httpx.Response, gates: list[threading.Event], seen: list[int]) -> bytes:
    """The whole body as it came; gates[i] is set once seen[i] bytes have arrived."""
    received = b""
    steps = iter(zip(gates, seen, strict=True))
    step = next(steps, None)
    while step is not None and step[1] == 0:
        step[0].set()
        step = next(steps, None)
    for data in r.iter_raw():
        received += data
        while step is not None and len(received) >= step[1]:
            step[0].set()
            step = next(steps, None)
    return received


def recorded(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / f"{SESSION}.jsonl").read_text().splitlines()]


@pytest.fixture
def gates() -> Iterator[list[threading.Event]]:
    made = [threading.Event(), threading.Event()]
    yield made
    for gate in made:  # a failed test never leaves the upstream waiting
        gate.set()


# ---- the upstream key split between reads


@pytest.mark.parametrize("record", [False, True], ids=["plain", "recorded"])
@pytest.mark.parametrize("sse", [True, False], ids=["sse", "chunked-json"])
def test_the_upstream_key_split_between_two_reads_is_masked(
    proxy: ProxyFactory, tmp_path: Path, gates: list[threading.Event], sse: bool, record: bool
) -> None:
    if sse:
        first = delta("echo: ")
        pieces = [first, b'data: {"choices":[{"index":0,"delta":{"content":"' + KEY[:HALF]]
        pieces.append(KEY[HALF:] + b'"},"finish_reason":null}]}\n\n' + FINISH + b"data: [DONE]\n\n")
    else:
        pieces = [
            b'{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,',
            b'"message":{"role":"assistant","content":"your key is ' + KEY[:HALF],
            KEY[HALF:] + b' indeed"},"finish_reason":"stop"}]}',
        ]
    whole = b"".join(pieces)
    # pieces[2] goes once the proxy has read pieces[1]: a recorded JSON body goes out a piece
    # late (the last one waits for the recording), anything else at once but for a start of the key
    after_second = len(pieces[0]) + (0 if record and not sse else len(pieces[1]) - HALF)
    settings: dict[str, Any] = {"upstream_api_key": KEY.decode()}
    if record:
        settings["record_dir"] = tmp_path / "rec"
    content_type = b"text/event-stream" if sse else b"application/json"
    with (
        in_steps(content_type, pieces, gates) as up,
        proxy(upstream=up.url, **settings) as url,
        httpx.stream(
            "POST",
            url + "/chat/completions",
            json={**CHAT, "stream": sse},
            headers={"x-session-affinity": SESSION},
            timeout=30,
        ) as r,
    ):
        received = receive(r, gates, [0, after_second])
    assert r.status_code == 200 and r.headers["x-replay-source"] == "upstream"
    assert KEY not in received
    assert received == whole.replace(KEY, STARS)  # every other byte as it came, in order
    assert len(received) == len(whole) and STARS in received
    if record:
        [line] = recorded(tmp_path / "rec")
        text = json.dumps(line)
        assert line["status"] == 200 and line["error"] is None
        assert KEY.decode() not in text and "[redacted]" in text


# ---- end markers only at the start of a line


def quoting(marker: str, released: threading.Event) -> Any:
    """A chat stream whose first delta quotes `marker`, then one more delta; the rest once
    `released`."""

    def answer(seen: Seen) -> Response:
        import anyio.to_thread

        async def events() -> Any:
            yield delta(f"the stream ends with {marker}\n\n{marker} and so on")
            yield delta("after")
            await anyio.to_thread.run_sync(released.wait, abandon_on_cancel=True)
            yield FINISH + b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return answer


@pytest.mark.parametrize(
    "marker", ["data: [DONE]", "event: message_stop", "event: response.completed"]
)
def test_a_marker_quoted_in_a_delta_does_not_hold_back_the_stream(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path, marker: str
) -> None:
    fake, upstream_url = upstream
    released = threading.Event()
    fake.then(quoting(marker, released))
    folder = tmp_path / "rec"
    try:
        with (
            proxy(upstream=upstream_url, record_dir=folder) as url,
            httpx.stream(
                "POST",
                url + "/chat/completions",
                json={**CHAT, "stream": True},
                headers={"x-session-affinity": SESSION},
                timeout=30,  # were the events held, this fails instead of hanging
            ) as r,
        ):
            lines = (line for line in r.iter_lines() if line)
            first, second = next(lines), next(lines)
            assert not released.is_set()  # both came while the upstream still held the rest
            released.set()
            rest = list(lines)
    finally:
        released.set()
    content = f"the stream ends with {marker}\n\n{marker} and so on"
    assert json.loads(first.removeprefix("data: "))["choices"][0]["delta"]["content"] == content
    assert json.loads(second.removeprefix("data: "))["choices"][0]["delta"]["content"] == "after"
    assert rest[-1] == "data: [DONE]" and len(rest) == 2
    [line] = recorded(folder)
    assert line["status"] == 200 and line["error"] is None
    assert line["message"]["content"] == content + "after"


def crlf_event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\r\ndata: ".encode() + orjson.dumps({"type": kind, **data}) + b"\r\n\r\n"


MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": []}
ANTHROPIC = b"".join(
    crlf_event(kind, data)
    for kind, data in [
        ("message_start", {"message": MESSAGE}),
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "done"}}),
        ("content_block_stop", {"index": 0}),
        ("message_delta", {"delta": {"stop_reason": "end_turn"}}),
    ]
)


@pytest.mark.parametrize(
    ("path", "before", "after"),
    [
        ("/chat/completions", delta("done") + FINISH + b"da", b"ta: [DONE]\n\n"),
        ("/chat/completions", delta("done") + FINISH, b"data: [DONE]\n\n"),
        (
            "/messages",
            ANTHROPIC + b"event: message_",
            b'stop\r\ndata: {"type":"message_stop"}\r\n\r\n',
        ),
    ],
    ids=["marker-split", "newline-before-split", "crlf-event-split"],
)
def test_a_marker_split_between_two_reads_still_ends_the_stream(
    proxy: ProxyFactory,
    tmp_path: Path,
    gates: list[threading.Event],
    path: str,
    before: bytes,
    after: bytes,
) -> None:
    """The recording is on disk before the client sees the final event: its end was held."""
    folder = tmp_path / "rec"
    with (
        in_steps(b"text/event-stream", [before, after], gates[:1]) as up,
        proxy(upstream=up.url, record_dir=folder) as url,
        httpx.stream(
            "POST",
            url + path,
            json={**CHAT, "stream": True, "max_tokens": 8},
            headers={"x-session-affinity": SESSION},
            timeout=30,
        ) as r,
    ):
        received = b""
        at_the_end: list[dict[str, Any]] | None = None
        for data in r.iter_raw():
            received += data
            if len(received) >= len(before):  # the proxy has read the first piece
                gates[0].set()
            if at_the_end is None and after.rstrip() in received:
                at_the_end = recorded(folder)  # the last event is here: so is the recording
    assert at_the_end is not None
    [line] = at_the_end
    assert received == before + after
    assert line["status"] == 200 and line["error"] is None
    assert "done" in json.dumps(line["message"])
