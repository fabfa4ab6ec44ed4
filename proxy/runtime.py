"""Runtime: what a running proxy holds, made once per app and reached through app.state."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from proxy.config import Settings
from proxy.http.guard import Guard
from proxy.http.incoming import Incoming
from proxy.logs import request_line
from proxy.metrics import Metrics
from proxy.recording.dumper import Dumper
from proxy.recording.recorder import Exchange, Recorder
from proxy.recording.tap import Tap, client_secrets
from proxy.replay.engine import Rules
from proxy.replay.presets import Preset, recognise
from proxy.sessions.library import Library
from proxy.sessions.registry import Sessions
from proxy.store import Store
from proxy.upstream import Captured, PassThrough, Upstream


@dataclass(slots=True)
class Runtime:
    settings: Settings
    store: Store
    library: Library
    sessions: Sessions
    upstream: Upstream
    rules: Rules
    metrics: Metrics
    recorder: Recorder | None = None
    dumper: Dumper | None = None
    guard: Guard = field(default_factory=Guard)

    @property
    def strict(self) -> bool:
        return self.rules.strict is not None

    def preset(self, user_agent: str, body: object, *, results: bool = False) -> Preset | None:
        """The preset of the harness that sent the request, where something reads it: in strict
        mode, when recording, and for a request carrying tool results (compared with its masks);
        None with --no-presets."""
        if not self.settings.presets or not (self.strict or self.recorder is not None or results):
            return None
        return recognise(body, user_agent)

    def answered(
        self, api: str, session: str, lane: str, source: str, turn: str, status: int, started: float
    ) -> None:
        """What a request got, in the request log and the metrics (errors the front answers are
        counted by front.answer_error)."""
        ms = (time.perf_counter() - started) * 1000
        request_line(api, session, lane, source, turn, status, ms)
        self.metrics.answered(api, lane, source, status)

    def tap(
        self,
        incoming: Incoming,
        *,
        session: str,
        lane: str,
        api: str,
        body: object,
        stream: bool,
        perf_start: float,
    ) -> Tap | None:
        """A Tap for this exchange, or None when nothing is recorded or dumped (the usual case:
        then no copy of the exchange is made at all)."""
        dumper = None if self.strict else self.dumper
        if self.recorder is None and dumper is None:
            return None
        exchange = Exchange(
            session=session,
            lane=lane,
            api=api,
            method=incoming.method,
            path=incoming.path,
            source="",
            request=body,
            stream=stream,
            started=time.time(),
        )
        return Tap(
            exchange,
            recorder=self.recorder,
            dumper=dumper,
            secrets=client_secrets(incoming.headers, incoming.query),
            perf_start=perf_start,
        )

    async def forward(
        self,
        request: Incoming,
        body: bytes,
        headers: list[tuple[bytes, bytes]],
        tap: Tap | None = None,
        *,
        api: str,
        started: float,
        values: Mapping[str, str] | None = None,
    ) -> PassThrough:
        """`values`: {session} and {trajectory}, for an upstream per session."""
        metrics = self.metrics

        async def done(captured: Captured) -> None:
            assert captured.finished is not None  # PassThrough sets it before calling this
            metrics.upstream(api, started, captured.first_byte, captured.finished)
            if tap is not None:
                await tap.forwarded(captured)

        response = await self.upstream.send(
            request.method,
            request.raw_path,
            request.query,
            request.raw_headers,
            body,
            on_complete=done,
            keep_body=tap is not None,
            values=values,
        )
        response.raw_headers.extend(headers)
        return response
