"""One completion request on its way through proxy.http.completions, with what every step needs to
know about it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from proxy.apis import Api
from proxy.http.incoming import Incoming
from proxy.lineage import Lineage
from proxy.log_format import request_line
from proxy.offload import Request
from proxy.recording.tap import Tap
from proxy.replay.conversation import Conversation, Lane
from proxy.replay.presets import Preset
from proxy.runtime import Runtime


@dataclass(slots=True)
class InFlight:
    """One request on its way through, with what every step needs to know about it."""

    request: Incoming
    runtime: Runtime
    api: Api
    conv: Conversation
    body: dict[str, Any]
    raw: bytes
    session: str
    lane: Lane
    parent: str | None
    tap: Tap | None  # only with --record-dir or --dump-dir
    started: float  # time.perf_counter() when it came in
    headers: list[tuple[bytes, bytes]]  # added to the answer's
    preset: Preset | None  # the harness's (strict mode and recording only)
    trajectory: str | None = None  # the script's name once bound, else the one the request names
    # a body too large to read here: `conv` and `body` lack its history, which a worker process
    # reads (proxy.offload); `replies` and `history` are what is needed of it here
    offloaded: Request | None = None
    replies: int = 0
    history: bytes | None = None  # the history as JSON, for a dump

    # a live call after the replay: {"handoff_turn", "restore"} (proxy.replay.restore)
    handoff: dict[str, str] | None = None
    # a recorded child's lane (proxy.sessions.children): the root session, and the child's lineage
    root: str | None = None
    lineage: Lineage | None = None

    @property
    def values(self) -> dict[str, str]:
        """{session}, {trajectory}, {handoff_turn} and {restore}, for the upstream's URL and
        headers (empty when not known)."""
        return {  # a child's lane goes where its root goes: the rollout is the root's
            "session": self.root or self.session,
            "trajectory": self.trajectory or "",
            **(self.handoff or {}),
        }

    def upstream(self) -> str | None:
        """Where this session's live calls go, when that depends on the session; a query that
        would set one of the template's own parameters is refused here, before anything is
        recorded."""
        upstream = self.runtime.upstream
        if upstream.target is None:
            return None
        upstream.target.own(self.request.query)
        return upstream.where(self.values)

    def done(self, source: str, turn: str, status: int) -> None:
        answered(
            self.runtime, self.api.name, self.session, self.lane, source, turn, status, self.started
        )


def answered(
    runtime: Runtime,
    api: str,
    session: str,
    lane: str,
    source: str,
    turn: str,
    status: int,
    started: float,
) -> None:
    """What a request got, in the request log and the metrics (errors the front answers are
    counted by front.answer_error)."""
    ms = (time.perf_counter() - started) * 1000
    request_line(api, session, lane, source, turn, status, ms)
    runtime.metrics.answered(api, lane, source, status)
