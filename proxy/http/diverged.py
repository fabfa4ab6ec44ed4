"""A divergence counted in the metrics (the error it is told: proxy.serving.outcome)."""

from __future__ import annotations

from proxy.replay.engine import Divergence
from proxy.runtime import Runtime


def count(runtime: Runtime, d: Divergence) -> None:
    """Counted in the metrics, by kind and verdict."""
    runtime.metrics.diverged(d.kind, d.verdict.verdict)
