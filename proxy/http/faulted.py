"""Answers with a fault injected into them (proxy.replay.faults decides which): an error in the
API's own shape, a stream cut short, a stall, a delay.

A cut is an ASGI response that ends without its last body message: the server (uvicorn) then
closes the connection, as it must, and logs that the answer was incomplete, which it was; the
request log says just before that the fault was injected.

A wait (a delay, a stall) ends at once when the client leaves (`wait_or_gone`): nothing more is
sent, `on_complete` never runs (the answer was not delivered, so it is not recorded), and the
rendered answer and the connection are let go. sse-starlette does the same for a streamed stall:
its disconnect listener cancels the generator in its sleep.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence

from sse_starlette import EventSourceResponse
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from proxy.apis import Api
from proxy.apis.framing import Framing
from proxy.errors import InjectedFault, error_response
from proxy.http.answers import OnComplete, rendered
from proxy.replay.faults import Fault, Kind

WHAT = {
    Kind.RATE_LIMITED: "rate limited",
    Kind.SERVER_ERROR: "server error",
    Kind.UNAVAILABLE: "service unavailable",
}


def fault_error(
    fault: Fault, *, api: Api, where: str, headers: list[tuple[bytes, bytes]]
) -> tuple[Response, InjectedFault]:
    """An error kind (faults.ERRORS) as the real API answers it, with retry-after and no
    x-should-retry."""
    status = fault.kind.status
    assert status is not None
    error = InjectedFault(
        status,
        f"[replay-proxy] fault injected at {where}: {fault.kind.value} {WHAT[fault.kind]}; "
        f"retry after {fault.retry_after:g} s",
        fault=fault.label,
    )
    own = {k.decode(): v.decode() for k, v in headers}
    return error_response(
        error, shape=api.error_body, headers={**own, **fault.retry_headers()}
    ), error


def faulted(
    fault: Fault,
    parts: Sequence[bytes],
    headers: list[tuple[bytes, bytes]],
    *,
    content_type: bytes,
    on_complete: OnComplete | None,
    call_event: bytes = b"",
    framing: Framing | None = None,
) -> Response:
    """The answer, delayed, stalled or cut as the fault says. For a cut, `on_complete` runs
    when the cut is made (it records the fault); `call_event`: what an event carrying a tool
    call holds in this API (the cut stops before the first). `framing`: a stream's, whose
    parts are SSE events, framed for the wire once cut."""
    seconds = fault.seconds or 0.0
    if fault.kind is Kind.DELAY:
        wire = parts if framing is None else framing.out(parts)
        return Delayed(
            seconds, rendered(wire, headers, content_type=content_type, on_complete=on_complete)
        )
    stream = framing is not None
    if stream and len(parts) == 1:  # a recorded stream (strict mode) is kept as one piece
        parts = [event + b"\n\n" for event in parts[0].split(b"\n\n") if event.strip()]
    if fault.kind is Kind.STALL and framing is not None:
        events = [piece for part in parts for piece in framing.out([part])]
        stalled = EventSourceResponse(
            _stalled(events, seconds, on_complete), ping=0, media_type=content_type.decode()
        )
        stalled.raw_headers.extend(headers)
        return stalled
    return Shaped(fault, parts, headers, content_type, on_complete, call_event, framing)


async def wait_or_gone(receive: Receive, seconds: float) -> bool:
    """Wait `seconds`, unless the client leaves first: then True, at once.

    The request body has been read whole before any answer (proxy.http.incoming), so `receive`
    now yields only `http.disconnect` (as for proxy.upstream.passthrough's watcher)."""
    try:
        async with asyncio.timeout(seconds):
            while (await receive())["type"] != "http.disconnect":
                pass
    except TimeoutError:
        return False
    return True


async def _stalled(
    parts: Sequence[bytes], seconds: float, on_complete: OnComplete | None
) -> AsyncIterator[bytes]:
    last = len(parts) - 1
    for i, part in enumerate(parts):
        if i == last and on_complete is not None:
            await on_complete()
        yield part
        if i == 0:  # a client that leaves: sse-starlette cancels the generator here
            await asyncio.sleep(seconds)


class Shaped(Response):
    """A stall of a JSON answer (headers, then the body after the stall), or a cut (a stream
    after half its events and before its first tool call, a JSON answer after its headers)."""

    def __init__(
        self,
        fault: Fault,
        parts: Sequence[bytes],
        headers: list[tuple[bytes, bytes]],
        content_type: bytes,
        on_complete: OnComplete | None,
        call_event: bytes = b"",
        framing: Framing | None = None,
    ) -> None:
        self.fault = fault
        self.parts = parts
        self.call_event = call_event
        self.on_complete = on_complete
        self.status_code = 200
        self.background = None
        self.stream = framing is not None
        self.out: Callable[[Sequence[bytes]], list[bytes]] = (
            framing.out if framing is not None else list
        )
        head = [(b"content-type", content_type)]
        if self.stream:
            head.append((b"cache-control", b"no-store"))
        else:
            head.append((b"content-length", str(sum(len(p) for p in parts)).encode()))
        self.raw_headers = [*head, *headers]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        if self.fault.kind is Kind.DROP:
            kept: Sequence[bytes] = ()
            if self.stream and len(self.parts) > 1:
                # half its events, never a tool call's: a harness that runs a call as soon as
                # it has streamed in would run it, then retry the turn and run it again
                marker = self.call_event
                first = next((i for i, p in enumerate(self.parts) if marker and marker in p), None)
                half = len(self.parts) // 2
                kept = self.parts[: half if first is None else min(half, first)]
            elif self.stream and self.parts:  # one event (a Gemini text turn): never its end
                event = self.parts[0]
                finish = event.find(b'"finishReason"')
                kept = [event[: min(len(event) // 2, finish if finish > 0 else len(event))]]
            for part in self.out(kept):  # framed for the wire once cut (Bedrock's frames)
                await send({"type": "http.response.body", "body": part, "more_body": True})
            # returning now leaves the response incomplete: the server closes the connection
            if self.on_complete is not None:
                await self.on_complete()
            return
        if await wait_or_gone(receive, self.fault.seconds or 0.0):
            return  # not delivered: no body, and no on_complete
        if self.on_complete is not None:
            await self.on_complete()
        await send({"type": "http.response.body", "body": b"".join(self.parts)})


class Delayed(Response):
    """The whole answer, after a wait."""

    def __init__(self, seconds: float, answer: Response) -> None:
        self.seconds = seconds
        self.answer = answer
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if await wait_or_gone(receive, self.seconds):
            return  # nothing was sent; the answer (and its on_complete) never runs
        await self.answer(scope, receive, send)
