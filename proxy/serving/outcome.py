"""What a completion request gets once the engine has decided (proxy.replay.engine.decide) and the
session's state has said which fault, if any, is due at this turn: plain code, no sockets.

- Scripted or Stop: an Answer, the turn rendered in the request's API (a recorded answer as it was
  recorded, in strict mode), with the fault that shapes it (a delay, a stall, a cut), or a
  FaultError instead of it (429, 500, 503: the harness retries and gets the same turn);
- Diverged: Refused, with the error in which the request is told where it left its script;
- Forward: Live, unless strict replay, which never goes upstream: Refused.

proxy.http.completions does the I/O around it: the store before, the bytes and the upstream
after.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proxy.apis import Api
from proxy.apis.framing import Framing
from proxy.errors import NotFound, ProxyError, ReplayDiverged
from proxy.replay.conversation import Conversation, Lane
from proxy.replay.engine import Diverged, Divergence, Forward, Scripted, Stop
from proxy.replay.faults import Fault, Kind
from proxy.replay.presets import Preset
from proxy.replay.trajectory import Trajectory, Turn
from proxy.replay.usage import stable_time, usage_for
from proxy.serving.source import Source

JSON = b"application/json"
STOP_TEXT = (
    "[replay-proxy] The script is complete: all {total} scripted turns were served, and "
    "--after-script stop ends the run here instead of going live."
)


@dataclass(frozen=True, slots=True)
class Answer:
    """A scripted turn (or the stop turn), rendered."""

    parts: list[bytes]  # a stream's SSE events (not yet framed), or one JSON body
    content_type: bytes
    framing: Framing | None  # a stream's way over the wire, applied once a fault has cut it
    source: Source  # SCRIPTED or STOP
    label: str  # "2/5", or "stop"
    turn: Turn  # as served: its usage (recorded, else estimated) and its time
    fault: Fault | None = None  # a delay, a stall or a cut that shapes it

    @property
    def cut(self) -> bool:
        """The drop fault: the answer is cut off, and recorded as the fault it is."""
        return self.fault is not None and self.fault.kind is Kind.DROP

    def wire(self) -> list[bytes]:
        """The parts as they go over the wire, when no fault shapes them."""
        return self.parts if self.framing is None else self.framing.out(self.parts)


@dataclass(frozen=True, slots=True)
class FaultError:
    """An error fault (429, 500, 503) instead of the turn."""

    fault: Fault
    label: str


@dataclass(frozen=True, slots=True)
class Refused:
    """Not answered from the script, and not sent upstream: a divergence (told here, in the
    API's shape), or strict replay with nothing to replay (`raised`: answered as any error the
    proxy makes)."""

    error: ProxyError
    label: str
    source: Source
    raised: bool = False


@dataclass(frozen=True, slots=True)
class Live:
    """Upstream: the script is used up, the request went beyond it, or there is none."""

    decision: Forward


Outcome = Answer | FaultError | Refused | Live


def outcome(
    decision: Scripted | Stop | Diverged | Forward,
    *,
    api: Api,
    conv: Conversation,
    body: dict[str, Any],
    size: int,
    script: Trajectory | None,
    fault: Fault | None,
    strict: bool,
    session: str,
    lane: str = Lane.MAIN.value,
    preset: Preset | None = None,
) -> Outcome:
    """What the request gets. `size`: its body's bytes (a turn without recorded usage is given
    an estimate from it); `fault`: the one due at this turn of the session, if any."""
    if isinstance(decision, Diverged):
        d = decision.divergence
        error = diverged(session, script, decision, preset, lane)
        return Refused(error, f"{d.turn}/{decision.total}", Source.DIVERGED)
    if isinstance(decision, Forward):
        if not strict:
            return Live(decision)
        refusal = NotFound(
            f"strict replay: session {session} has no recording to replay (--mode strict never "
            "forwards upstream); bind one with x-replay-trajectory, by its task, or the admin API"
        )
        return Refused(refusal, "-", Source.ERROR, raised=True)
    if isinstance(decision, Scripted) and fault is not None and fault.kind.status is not None:
        return FaultError(fault, f"{decision.turn.number}/{decision.total}")
    return render(decision, api=api, conv=conv, body=body, size=size, script=script, fault=fault)


def render(
    decision: Scripted | Stop,
    *,
    api: Api,
    conv: Conversation,
    body: dict[str, Any],
    size: int,
    script: Trajectory | None,
    fault: Fault | None = None,
) -> Answer:
    """The turn in the request's API: a stream's events or a JSON body, each rendered once."""
    if isinstance(decision, Stop):
        turn = Turn(decision.total + 1, -1, STOP_TEXT.format(total=decision.total), None, ())
        label, source = "stop", Source.STOP
    else:
        turn = decision.turn
        label, source = f"{turn.number}/{decision.total}", Source.SCRIPTED
    served = f"replay-{script.digest[:12] if script else 'none'}"
    key = f"{served}-{turn.number}"
    # the usage as recorded (else estimated), and a time that is the same on every replay
    created = turn.created or stable_time(served, turn.number)
    turn = turn.served(usage_for(turn, size), created)
    recorded = turn.recorded
    if recorded is not None and (recorded.stream, recorded.status, recorded.api) == (
        conv.stream,
        200,
        api.name,
    ):
        # strict replay of a recording: the answer exactly as recorded (a stream's SSE events,
        # framed again for an API whose wire frames them)
        parts = [recorded.body]
        content_type = recorded.content_type.encode()
    elif conv.stream:
        parts = api.stream(turn, conv, body, key)
        content_type = api.framing.content_type
    else:
        parts = [api.whole(turn, conv, body, key)]
        content_type = JSON
    framing = api.framing if conv.stream else None
    return Answer(parts, content_type, framing, source, label, turn, fault)


def diverged(
    session: str,
    script: Trajectory | None,
    decision: Diverged,
    preset: Preset | None,
    lane: str = Lane.MAIN.value,
) -> ReplayDiverged:
    """The error a request gets whose history (or, in strict mode, whose request) left its
    script: where, what differs, and the verdict."""
    d = decision.divergence
    name = script.name if script else None
    where = f"session {session}, lane {lane}, step {d.turn}/{decision.total}"
    if d.kind == "beyond":
        message = f"strict replay: {where}: {d.reason}"
    elif d.kind == "request":
        message = (
            f"strict replay: {where} of {name!r}: {d.reason} at {d.difference.path or '$'}\n"
            f"  recorded: {d.difference.expected}\n  now:      {d.difference.actual}\n"
            f"  verdict:  {_verdict(d)}"
        )
    else:
        message = (
            f"session {session}: the request does not follow the script {name!r} at turn "
            f"{d.turn}/{decision.total}: {d.describe()}"
        )
    return ReplayDiverged(
        message,
        param=d.difference.path or None,
        session=session,
        lane=lane,
        script=name,
        preset=preset.name if preset else None,
        **d.as_dict(),
    )


def _verdict(d: Divergence) -> str:
    if not d.volatile:
        return "changed (no mask a harness preset or the proxy knows explains it)"
    return (
        f"volatile: only values that change between runs differ; {d.verdict.flags()} would cover it"
    )
