"""Relay: a streamed upstream answer written to the client from the upstream connection's own
read callback, not from a task woken once per piece.

A task switch per piece (wake a future, resume the task through every frame of the ASGI call,
then wait on a new future) cost more than the rest of relaying it: on many slow streams, 22k
instructions a piece against 14k this way. The ASGI `send` for a body piece normally finishes
without waiting, so it is stepped by hand right there; when it does wait (the client's socket
is full), reading from the upstream pauses and a task finishes that send first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Generator
from types import CoroutineType
from typing import Any

from starlette.types import Send

from proxy.client import Answer


class Relay:
    """Sends `answer`'s body through `send` as it arrives, each piece turned by `prepare` if
    given; `finished` ends with the body, or with what broke it off (the upstream's error, or
    the send's). `first_byte` is the time.perf_counter() of the first piece."""

    def __init__(
        self, answer: Answer, send: Send, prepare: Callable[[bytes], bytes] | None = None
    ) -> None:
        self.answer = answer
        assert answer.conn is not None
        self.conn = answer.conn  # read directly by pump()
        self.send = send
        self.prepare = prepare
        self.first_byte: float | None = None
        self.finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.sending: asyncio.Future[Any] | None = None  # a send that had to wait
        answer.listen(self.pump)
        self.pump()  # what arrived with the head

    def pump(self) -> None:
        """Runs after every read from the upstream, so it is written for that: the connection's
        fields read directly, no calls but the send (a Python call costs as much as the rest)."""
        if self.sending is not None or self.finished.done():
            return
        conn = self.conn
        body = conn.body
        if conn.paused:  # it was full, or a send had to wait: now all of it goes out
            conn.resume()
        try:
            if body:  # all that has arrived: nothing more can until this returns
                chunk = body.popleft() if len(body) == 1 else b"".join(body)
                body.clear()
                conn.queued = 0
                if self.first_byte is None:
                    self.first_byte = time.perf_counter()
                if self.prepare is not None:
                    chunk = self.prepare(chunk)
                if chunk:
                    message = {"type": "http.response.body", "body": chunk, "more_body": True}
                    step: Any = self.send(message)
                    if type(step) is not CoroutineType:  # any awaitable will do, if slower
                        step = step.__await__()
                    try:
                        waits_on = step.send(None)
                    except StopIteration:
                        pass
                    else:  # the client reads slowly: finish this send first, reading nothing
                        conn.pause()
                        self.sending = asyncio.ensure_future(_Rest(step, waits_on))
                        self.sending.add_done_callback(self._sent)
                        return
            if conn.complete:  # all of it sent: the connection can go back to the pool
                self.answer.done = True
                self.finished.set_result(None)
            elif conn.error is not None:  # also how a client leaving shows (answer.close())
                self.finished.set_exception(conn.error)
        except Exception as exc:  # a callback: the task awaiting `finished` raises it
            self.finished.set_exception(exc)

    def _sent(self, sending: asyncio.Future[Any]) -> None:
        self.sending = None
        if self.finished.done():
            return
        if sending.cancelled():
            self.finished.cancel()
        elif (exc := sending.exception()) is not None:
            self.finished.set_exception(exc)
        else:
            self.pump()  # which resumes reading

    async def close(self) -> None:
        """For the task that awaited `finished`, leaving: a send still waiting is cancelled, and
        over before this returns."""
        sending = self.sending
        if sending is not None:
            sending.cancel()
            await asyncio.wait((sending,))


class _Rest:
    """The rest of an awaitable that was started by hand and now waits on `waits_on`: awaited in
    a task, it hands each future up to that task and resumes the awaitable when it is done."""

    def __init__(self, step: Generator[Any, None, Any], waits_on: Any) -> None:
        self.step = step
        self.waits_on = waits_on

    def __await__(self) -> Generator[Any, None, Any]:
        waits_on = self.waits_on
        while True:
            try:
                yield waits_on
            except BaseException as exc:  # the task was cancelled: so is the send
                try:
                    waits_on = self.step.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            try:
                waits_on = self.step.send(None)
            except StopIteration as stop:
                return stop.value
