"""A divergence as its request is told it: the error in the API's own shape, and its count."""

from __future__ import annotations

from proxy.errors import ReplayDiverged
from proxy.replay.conversation import Lane
from proxy.replay.engine import Diverged, Divergence
from proxy.replay.presets import Preset
from proxy.replay.trajectory import Trajectory
from proxy.runtime import Runtime


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


def count(runtime: Runtime, d: Divergence) -> None:
    """Counted in the metrics, by kind and verdict."""
    runtime.metrics.diverged(d.kind, d.verdict.verdict)


def _verdict(d: Divergence) -> str:
    if not d.volatile:
        return "changed (no mask a harness preset or the proxy knows explains it)"
    return (
        f"volatile: only values that change between runs differ; {d.verdict.flags()} would cover it"
    )
