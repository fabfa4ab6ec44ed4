"""Tap: what the recorder, the dumper and the tracer learn from one exchange, once it completes.

A Tap is made per request only when --record-dir or --dump-dir is set, or OpenTelemetry export
(proxy.recording.tracer); without them nothing is copied or parsed on the way through.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from proxy.apis import APIS, Api, usage_in
from proxy.apis.framing import SSE, Framing
from proxy.apis.readback import Assembled, sse_events
from proxy.errors import ProxyError
from proxy.recording.dumper import Dumper
from proxy.recording.recorder import Exchange, RawJson, Recorder
from proxy.recording.tracer import Tracer
from proxy.replay.trajectory import Recorded, Usage
from proxy.sessions.status import iso
from proxy.upstream import Captured
from proxy.upstream.dialect import credential_headers
from proxy.upstream.headers import query_key

log = logging.getLogger("proxy.recording.tap")

ReadAnswer = Callable[[bytes, bool], Assembled]  # an Api's read_answer
OFF_LOOP = 256 * 1024  # an answer larger than this is read back in a thread

# where any API's client may carry a credential (each API's dialect says), to be scrubbed
_DIALECTS = tuple(api.upstream for api in APIS)
_CREDENTIAL_HEADERS = sorted(h.decode() for h in credential_headers(_DIALECTS))
_KEY_QUERIES = sorted({d.key_query for d in _DIALECTS if d.key_query is not None})


def client_secrets(headers: Mapping[str, str], query: str = "") -> tuple[str, ...]:
    """The client's own credentials (headers, and a key in the query), so that they can be
    scrubbed from what is written."""
    values = []
    for name in _KEY_QUERIES:
        key = query_key(query, name)
        if key:
            values.append(key)
    for name in _CREDENTIAL_HEADERS:
        value = headers.get(name)
        if value:
            values.append(value)
            values.append(value.removeprefix("Bearer ").removeprefix("bearer ").strip())
    return tuple(values)


class Tap:
    def __init__(
        self,
        exchange: Exchange,
        *,
        recorder: Recorder | None,
        dumper: Dumper | None,
        secrets: tuple[str, ...],
        perf_start: float,
        api: Api | None = None,
        tracer: Tracer | None = None,
        model: str | None = None,
        parent: dict[str, str] | None = None,
    ) -> None:
        """`api`: the request's API (its row reads an answer back into a message, and its usage);
        None for a request of no completion API (forwarded as "other"). `model` and `parent`
        (the request's W3C trace context headers) are for the tracer's span."""
        self.exchange = exchange
        self.api = api
        self.reader: ReadAnswer | None = api.read_answer if api is not None else None
        self.framing: Framing = api.framing if api is not None else SSE  # SSE, or frames
        self.recorder = recorder
        self.dumper = dumper
        self.tracer = tracer  # spans are of completions only: relay.tap gives none without an API
        self.secrets = secrets
        self.perf_start = perf_start
        self.dump: dict[str, Any] | None = None  # set for live completions that are to be dumped
        # what the span says beyond the exchange's record
        self.model, self.parent = model, parent or {}
        self.usage: Usage | None = None
        self.answer: dict[str, Any] | None = None  # the answer's own id and model
        self.fault: str | None = None
        self.divergence: str | None = None
        self.verdict: str | None = None  # a divergence's: changed, or volatile
        self.trajectory: str | None = None

    def _ms(self, at: float | None) -> float | None:
        return None if at is None else round((at - self.perf_start) * 1000, 3)

    async def forwarded(self, captured: Captured) -> None:
        """A PassThrough's on_complete: runs before the end of the answer is released."""
        x = self.exchange
        x.status = captured.status
        x.content_type = captured.content_type
        x.ttfb_ms = self._ms(captured.first_byte)
        x.duration_ms = self._ms(time.perf_counter())
        x.error = captured.error
        x.stream = self.framing.carries(captured.content_type)
        if captured.over_limit:
            x.error = x.error or (
                f"the answer has {captured.size} bytes, more than --max-body-bytes "
                f"({captured.limit}): it was passed on whole but is not recorded"
            )
            log.warning("session %s: %s", x.session, x.error)
            await self._record()
            return
        body = captured.body()
        dump = self.dump is not None and captured.complete and captured.status == 200
        if len(body) > OFF_LOOP:  # parsing a large answer would stall every other request
            completion, assembled = await asyncio.to_thread(
                _read_answer, x, body, dump, self.reader
            )
        else:
            completion, assembled = _read_answer(x, body, dump, self.reader)
        self._learned(assembled)
        if completion is not None and self.dump is not None:
            await self._dump({**self.dump, "response": completion})
        await self._record()

    async def rendered(
        self,
        parts: list[bytes],
        *,
        stream: bool,
        message: dict[str, Any],
        turn: str,
        usage: Usage | None = None,
    ) -> None:
        self.usage = usage
        x = self.exchange
        x.status, x.stream, x.turn, x.message = 200, stream, turn, message
        x.finish_reason = "tool_calls" if message.get("tool_calls") else "stop"
        media = self.framing.content_type.decode().split(";")[0]
        x.content_type = media if stream else "application/json"
        body = b"".join(parts)
        if stream:
            x.events = sse_events(body)
        else:  # the proxy's own JSON: written into the line as it is, never read again here
            x.response = RawJson(body)
        x.ttfb_ms = x.duration_ms = self._ms(time.perf_counter())
        await self._record()

    async def replayed(self, recorded: Recorded, ref: str) -> None:
        """Strict mode answered from a recorded exchange."""
        x = self.exchange
        x.status, x.stream, x.content_type = recorded.status, recorded.stream, recorded.content_type
        x.extra = {"replayed_from": ref}
        if recorded.stream:
            x.events = sse_events(recorded.body)
        else:
            x.response = _json_or_text(recorded.body)
        if self.reader is not None and recorded.status == 200:
            assembled = self.reader(recorded.body, recorded.stream)
            x.message, x.finish_reason = assembled.message, assembled.finish_reason
            self._learned(assembled)
        x.ttfb_ms = x.duration_ms = self._ms(time.perf_counter())
        await self._record()

    async def error(self, error: ProxyError, source: str = "error") -> None:
        """The exchange got an error the proxy made (or a fault it injected, source `fault`):
        recorded with it."""
        x = self.exchange
        x.source, x.status, x.response, x.error = source, error.status, error.body(), error.message
        x.content_type = "application/json"
        x.duration_ms = self._ms(time.perf_counter())
        await self._record()

    def _learned(self, assembled: Assembled | None) -> None:
        """What the span says of an answer read back: its usage, id and model."""
        if assembled is None or self.tracer is None:
            return
        try:
            self.usage = usage_in(assembled.usage, self.api)
        except ValueError:  # a count no model reports: the span goes without it
            self.usage = None
        head = assembled.native or assembled.head or self.exchange.response
        self.answer = head if isinstance(head, dict) else None

    async def _record(self) -> None:
        if self.recorder is not None:
            try:
                await self.recorder.write(self.exchange, self.secrets)
            except OSError as exc:
                log.error("could not record session %s: %s", self.exchange.session, exc)
        if self.tracer is not None and self.api is not None:
            try:
                self.tracer.exchange(
                    self.exchange,
                    operation=self.api.operation,
                    provider=self.api.provider or self.api.name,
                    model=self.model,
                    usage=self.usage,
                    parent=self.parent,
                    fault=self.fault,
                    trajectory=self.trajectory,
                    answer=self.answer,
                    divergence=self.divergence,
                    verdict=self.verdict,
                )
            except Exception:  # a span must never fail an answer: said, and left out
                log.exception(
                    "could not make the span of a request of session %s", self.exchange.session
                )

    async def _dump(self, record: dict[str, Any]) -> None:
        assert self.dumper is not None
        try:
            await self.dumper.write(self.exchange.session, record)
        except OSError as exc:
            log.error("could not dump a completion of session %s: %s", self.exchange.session, exc)


def dump_record(
    *,
    session: str,
    parent: str | None,
    lane: str,
    turn: int,
    started: float,
    prefix: int | None,
    messages: Any,
) -> dict[str, Any]:
    return {
        "session_id": session,
        "parent_session_id": parent,
        "lane": lane,
        "turn": turn,
        "timestamp": iso(started),
        "replay_prefix_message_count": prefix,
        "messages": messages,
    }


def _read_answer(
    x: Exchange, body: bytes, dump: bool, reader: ReadAnswer | None
) -> tuple[dict[str, Any] | None, Assembled | None]:
    """The exchange's answer filled in from the body; the completion to dump, if one is due, and
    the answer as read back."""
    if reader is None:
        x.events = sse_events(body) if x.stream else None
        x.response = None if x.stream else _json_or_text(body)
        return None, None
    assembled = reader(body, x.stream)
    x.message, x.finish_reason = assembled.message, assembled.finish_reason
    if x.stream:
        x.events = assembled.events
    else:
        x.response = _json_or_text(body)
    return (assembled.completion() if dump else None), assembled


def _json_or_text(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", errors="replace")
