"""Real servers for tests: an ASGI app under uvicorn on a free loopback port (proxy.testing's,
the same users get), fake upstreams that answer like an LLM would, and a raw one (RawUpstream)
that writes whatever bytes a test needs, for the cases a well-behaved server never produces.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import socket
import threading
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from proxy.apis import bedrock
from proxy.testing import all_sessions as all_sessions  # the proxy's own, for tests too
from proxy.testing import serving


def running(app: Any) -> AbstractContextManager[str]:
    """Serve `app` on 127.0.0.1:<free port>; yields the base URL (no path)."""
    return serving(app)


@dataclass
class Seen:
    """One request the fake upstream received."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)


Answer = Callable[[Seen], Response]


@dataclass
class FakeUpstream:
    """Stands in for the LLM: records every request and answers from a queue, else with text."""

    requests: list[Seen] = field(default_factory=list)
    answers: deque[Answer] = field(default_factory=deque)
    fallback: Answer | None = None  # answers when the queue is empty (default: a text answer)

    def then(self, *answers: Answer) -> FakeUpstream:
        self.answers.extend(answers)
        return self

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._handle, methods=_METHODS)])

    async def _handle(self, request: Request) -> Response:
        seen = Seen(
            request.method,
            request.url.path,
            request.url.query,
            {k.lower(): v for k, v in request.headers.items()},
            await request.body(),
        )
        self.requests.append(seen)
        answer = self.answers.popleft() if self.answers else self.fallback or text("live answer")
        result = answer(seen)
        return await result if inspect.isawaitable(result) else result

    def posts(self, path: str = "/v1/chat/completions") -> list[Seen]:
        return [r for r in self.requests if r.method == "POST" and r.path == path]


_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def _completion(message: dict[str, Any], finish: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-upstream",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _respond(seen: Seen, message: dict[str, Any], finish: str) -> Response:
    body = seen.json
    model = body.get("model", "m")
    if not body.get("stream"):
        return Response(
            orjson.dumps(_completion(message, finish, model)), media_type="application/json"
        )
    head = {
        "id": "chatcmpl-upstream",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
    }
    deltas: list[dict[str, Any]] = [{"role": "assistant"}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for i, call in enumerate(message.get("tool_calls", [])):
        deltas.append({"tool_calls": [{"index": i, **call}]})

    async def events() -> Any:
        for delta in deltas:
            yield (
                b"data: "
                + orjson.dumps(
                    {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                )
                + b"\n\n"
            )
        yield (
            b"data: "
            + orjson.dumps(
                {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
            )
            + b"\n\n"
        )
        if (body.get("stream_options") or {}).get("include_usage"):  # as OpenAI does
            usage = _completion(message, finish, model)["usage"]
            yield b"data: " + orjson.dumps({**head, "choices": [], "usage": usage}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


def text(content: str) -> Answer:
    """A final text answer, as JSON or SSE following the request's `stream`."""
    return lambda seen: _respond(seen, {"role": "assistant", "content": content}, "stop")


def tool_call(name: str, arguments: str, call_id: str) -> Answer:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }
    return lambda seen: _respond(seen, message, "tool_calls")


def status(code: int, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return lambda seen: Response(
        orjson.dumps(body), status_code=code, media_type="application/json", headers=headers
    )


@dataclass
class Gate:
    """A stream the test controls: the first event goes out at once, the rest when released."""

    released: threading.Event = field(default_factory=threading.Event)
    closed: threading.Event = field(default_factory=threading.Event)  # set when the stream ends

    def answer(self, seen: Seen) -> Response:
        import anyio.to_thread

        async def events() -> Any:
            try:
                yield b'data: {"choices":[{"index":0,"delta":{"content":"first"}}]}\n\n'
                await anyio.to_thread.run_sync(self.released.wait, abandon_on_cancel=True)
                yield b"data: [DONE]\n\n"
            finally:
                self.closed.set()

        return StreamingResponse(events(), media_type="text/event-stream")


@dataclass
class FlakyFront:
    """Sits between a client and the proxy: the first answer for turn `turn` (x-replay-turn) is
    thrown away and replaced by a 500, so the client retries that very request."""

    target: str  # the proxy's root URL
    turn: str  # e.g. "2/3"
    failed: int = 0

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._handle, methods=_METHODS)])

    async def _handle(self, request: Request) -> Response:
        import httpx

        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")
        }
        async with httpx.AsyncClient(timeout=120) as client:
            r = await client.request(
                request.method,
                self.target
                + request.url.path
                + (f"?{request.url.query}" if request.url.query else ""),
                headers=headers,
                content=await request.body(),
            )
        if r.headers.get("x-replay-turn") == self.turn and not self.failed:
            self.failed += 1
            error = {"error": {"message": "injected failure: please retry", "type": "server_error"}}
            return Response(orjson.dumps(error), status_code=500, media_type="application/json")
        keep = {
            k: v
            for k, v in r.headers.items()
            if k.lower()
            not in ("content-length", "transfer-encoding", "connection", "content-encoding")
        }
        return Response(r.content, status_code=r.status_code, headers=keep)


def responses_text(content: str) -> Answer:
    """A final text answer in the Responses API, as JSON or named SSE events (hand-written)."""
    item = {"id": "msg_up", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": content, "annotations": []}]}  # fmt: skip
    added = {**item, "status": "in_progress", "content": []}
    parts = [
        (
            "response.content_part.added",
            {
                "item_id": "msg_up",
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            },
        ),
        (
            "response.output_text.delta",
            {"item_id": "msg_up", "output_index": 0, "content_index": 0, "delta": content},
        ),
    ]
    return _responses_answer(item, added, parts)


def responses_call(name: str, arguments: str, call_id: str) -> Answer:
    """A function call in the Responses API, as JSON or named SSE events (hand-written)."""
    item = {"id": f"fc_{call_id}", "type": "function_call", "status": "completed",
            "name": name, "arguments": arguments, "call_id": call_id}  # fmt: skip
    added = {**item, "status": "in_progress", "arguments": ""}
    delta = {"item_id": item["id"], "output_index": 0, "delta": arguments}
    return _responses_answer(item, added, [("response.function_call_arguments.delta", delta)])


def _responses_answer(
    item: dict[str, Any], added: dict[str, Any], parts: list[tuple[str, dict[str, Any]]]
) -> Answer:
    def answer(seen: Seen) -> Response:
        body = seen.json
        done = {"id": "resp_up", "object": "response", "created_at": 1, "status": "completed", "model": body.get("model"),
                "output": [item], "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}}  # fmt: skip
        if not body.get("stream"):
            return Response(orjson.dumps(done), media_type="application/json")
        events = [
            ("response.created", {"response": {**done, "status": "in_progress", "output": []}}),
            ("response.output_item.added", {"output_index": 0, "item": added}),
            *parts,
            ("response.output_item.done", {"output_index": 0, "item": item}),
            ("response.completed", {"response": done}),
        ]
        data = b"".join(
            f"event: {kind}\ndata: ".encode()
            + orjson.dumps({"type": kind, "sequence_number": i, **payload})
            + b"\n\n"
            for i, (kind, payload) in enumerate(events)
        )
        return Response(data, media_type="text/event-stream")

    return answer


def anthropic_text(content: str) -> Answer:
    """A final text answer in the Anthropic Messages API, as JSON or SSE events (hand-written)."""
    return anthropic_answer(content)


def anthropic_tool_use(name: str, arguments: dict[str, Any], call_id: str) -> Answer:
    """One tool call in the Anthropic Messages API (`stop_reason: tool_use`)."""
    return anthropic_answer(None, (name, arguments, call_id))


_MESSAGES = itertools.count(1)
CLOUD_STREAMS = (bedrock.STREAM, ":streamRawPredict")


def anthropic_answer(
    content: str | None, call: tuple[str, dict[str, Any], str] | None = None
) -> Answer:
    def answer(seen: Seen) -> Response:
        body = seen.json
        # Vertex AI and Bedrock name the model and the streaming in the URL
        model = body.get("model") or seen.path.rsplit("/models/", 1)[-1].split(":")[0]
        streamed = body.get("stream") or seen.path.endswith(CLOUD_STREAMS)
        usage = {"input_tokens": 3, "output_tokens": 2}
        stop = "end_turn" if call is None else "tool_use"
        blocks: list[dict[str, Any]] = []
        deltas: list[dict[str, Any]] = []
        if content is not None:
            blocks.append({"type": "text", "text": content})
            deltas.append({"type": "text_delta", "text": content})
        if call is not None:
            name, arguments, call_id = call
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
            deltas.append(
                {"type": "input_json_delta", "partial_json": orjson.dumps(arguments).decode()}
            )
        # an id per answer, as Anthropic's: Claude Code joins lines of one id into one message
        message = {"id": f"msg_up_{next(_MESSAGES)}", "type": "message", "role": "assistant", "model": model,
                   "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}  # fmt: skip
        if not streamed:
            return Response(orjson.dumps(message), media_type="application/json")
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"message": {**message, "content": [], "stop_reason": None}})
        ]
        for index, (block, delta) in enumerate(zip(blocks, deltas, strict=True)):
            start = {**block, "input": {}} if block["type"] == "tool_use" else {**block, "text": ""}
            events += [
                ("content_block_start", {"index": index, "content_block": start}),
                ("content_block_delta", {"index": index, "delta": delta}),
                ("content_block_stop", {"index": index}),
            ]
        events += [
            (
                "message_delta",
                {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
            ),
            ("message_stop", {}),
        ]
        data = b"".join(
            f"event: {k}\ndata: ".encode() + orjson.dumps({"type": k, **p}) + b"\n\n"
            for k, p in events
        )
        if seen.path.endswith(bedrock.STREAM):  # each event in an AWS event stream frame
            return Response(
                b"".join(bedrock.frame([data])), media_type=bedrock.CONTENT_TYPE.decode()
            )
        return Response(data, media_type="text/event-stream")

    return answer


def gemini_answer(parts: list[dict[str, Any]]) -> Answer:
    """A Gemini GenerateContentResponse with these parts: SSE (alt=sse), or JSON (hand-written)."""

    def answer(seen: Seen) -> Response:
        chunk = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": 3,
                "candidatesTokenCount": 2,
                "totalTokenCount": 5,
            },
            "modelVersion": seen.path.rsplit("/", 1)[-1].split(":")[0],
            "responseId": "resp-upstream",
        }
        if "alt=sse" in seen.query:
            return Response(
                b"data: " + orjson.dumps(chunk) + b"\r\n\r\n", media_type="text/event-stream"
            )
        return Response(orjson.dumps(chunk), media_type="application/json")

    return answer


def gemini_text(content: str) -> Answer:
    return gemini_answer([{"text": content}])


def gemini_call(name: str, args: dict[str, Any], call_id: str) -> Answer:
    return gemini_answer([{"functionCall": {"id": call_id, "name": name, "args": args}}])


def hang(released: threading.Event) -> Answer:
    """Accept the request and send nothing, not even headers, until `released`."""

    async def answer(seen: Seen) -> Response:
        import anyio.to_thread

        await anyio.to_thread.run_sync(released.wait, abandon_on_cancel=True)
        return Response(b"{}", media_type="application/json")

    return answer  # type: ignore[return-value]


def stall_after_first_event(released: threading.Event) -> Answer:
    """One event, then nothing until `released`."""

    def answer(seen: Seen) -> Response:
        import anyio.to_thread

        async def events() -> Any:
            yield b'data: {"choices":[{"index":0,"delta":{"content":"first"}}]}\n\n'
            await anyio.to_thread.run_sync(released.wait, abandon_on_cancel=True)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return answer


def drop_after_first_event() -> Answer:
    """One event, then the connection is cut (no end of the chunked body)."""

    def answer(seen: Seen) -> Response:
        async def events() -> Any:
            yield b'data: {"choices":[{"index":0,"delta":{"content":"first"}}]}\n\n'
            raise ConnectionAbortedError("the fake upstream drops the connection")

        return StreamingResponse(events(), media_type="text/event-stream")

    return answer


def raw(
    body: bytes, content_type: str, status_code: int = 200, headers: dict[str, str] | None = None
) -> Answer:
    """Exactly these bytes."""
    return lambda seen: Response(
        body, status_code=status_code, media_type=content_type, headers=headers
    )


@dataclass
class RawRequest:
    """One request as a raw upstream read it: the request line's target exactly as sent."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


class RawConnection:
    """One connection to a RawUpstream, for its script to read requests from and write bytes to."""

    def __init__(self, sock: socket.socket, seen: list[RawRequest]) -> None:
        self.sock = sock
        self.seen = seen
        self.buffer = b""

    def read_request(self) -> RawRequest | None:
        """The next request (its body by content-length), or None when the peer closed."""
        while b"\r\n\r\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buffer += data
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        line, *fields = head.decode("latin-1").split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers = {}
        for field_line in fields:
            name, _, value = field_line.partition(":")
            headers[name.strip().lower()] = value.strip()
        size = int(headers.get("content-length", "0"))
        while len(self.buffer) < size:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buffer += data
        body, self.buffer = self.buffer[:size], self.buffer[size:]
        request = RawRequest(method, target, headers, body)
        self.seen.append(request)
        return request

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)


def http_answer(body: bytes, status_line: bytes = b"200 OK", headers: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 " + status_line + b"\r\ncontent-type: application/json\r\n" + headers
        + b"content-length: %d\r\n\r\n" % len(body) + body
    )  # fmt: skip


class RawUpstream:
    """An upstream that speaks HTTP/1.1 as badly as a test needs: each connection is handed to
    `script(conn)` in a thread of its own, to read requests and write whatever bytes it likes.
    Every request read is kept in `requests`, in order, with its target as it came."""

    def __init__(self, script: Callable[[RawConnection], None]) -> None:
        self.script = script
        self.requests: list[RawRequest] = []
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"
        self._threads: list[threading.Thread] = []
        self._open: list[socket.socket] = []

    def __enter__(self) -> RawUpstream:
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        for sock in self._open:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            self._open.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            self.script(RawConnection(sock, self.requests))
        with contextlib.suppress(OSError):
            sock.close()


def session_status(url: str, session: str) -> dict[str, Any]:
    """A session's status from the proxy at `url` (its root, or its /v1 base URL)."""
    import httpx

    answer = httpx.get(url.removesuffix("/v1") + f"/replay/sessions/{session}")
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def vllm_text(
    content: str, prompt: list[int], generated: list[int], logprobs: list[float]
) -> Answer:
    """A final text answer as vLLM writes it with `return_token_ids` and `logprobs` (the
    prompt's ids on the body, the generation's on the choice, and with
    `return_tokens_as_token_ids` each logprob entry's token as "token_id:N"), JSON or SSE."""
    entries = [
        {"token": f"token_id:{t}", "logprob": p, "bytes": None, "top_logprobs": []}
        for t, p in zip(generated, logprobs, strict=True)
    ]

    usage = {
        "prompt_tokens": len(prompt),
        "completion_tokens": len(generated),
        "total_tokens": len(prompt) + len(generated),
    }

    def answer(seen: Seen) -> Response:
        body = seen.json
        head = {"id": "chatcmpl-vllm", "created": 1, "model": body.get("model", "m")}
        if not body.get("stream"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": {"content": entries},
                "finish_reason": "stop",
                "token_ids": generated,
            }
            whole = {**head, "object": "chat.completion", "choices": [choice], "usage": usage,
                     "prompt_token_ids": prompt}  # fmt: skip
            return Response(orjson.dumps(whole), media_type="application/json")
        chunk = {**head, "object": "chat.completion.chunk"}
        first = {**chunk, "prompt_token_ids": prompt, "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
        ]}  # fmt: skip
        pieces = [
            {
                "index": 0,
                "delta": {"content": content[:k] if i == 0 else content[k:]},
                "logprobs": {"content": part},
                "token_ids": ids,
                "finish_reason": None,
            }
            for i, (k, part, ids) in enumerate(
                [
                    (
                        len(content) // 2,
                        entries[: len(entries) // 2],
                        generated[: len(generated) // 2],
                    ),
                    (
                        len(content) // 2,
                        entries[len(entries) // 2 :],
                        generated[len(generated) // 2 :],
                    ),
                ]
            )
        ]
        last = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}

        async def events() -> Any:
            for data in (first, *({**chunk, "choices": [p]} for p in pieces), last):
                yield b"data: " + orjson.dumps(data) + b"\n\n"
            if (body.get("stream_options") or {}).get("include_usage"):
                yield b"data: " + orjson.dumps({**chunk, "choices": [], "usage": usage}) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return answer
