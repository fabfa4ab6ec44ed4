"""Sessions idle for --session-ttl are forgotten: a task of each worker asks the store to expire
them every quarter of the ttl (at most every minute), so a session goes between one ttl and one
and a quarter after its last request. Workers sharing a store each sweep it; a session is counted
by the one that removed it."""

from __future__ import annotations

import asyncio
import logging
import time

from proxy.metrics import Metrics
from proxy.store import Store

log = logging.getLogger("proxy.sessions")

MOST_SECONDS_APART = 60.0
LEAST_SECONDS_APART = 0.1


def interval(ttl: float) -> float:
    return max(LEAST_SECONDS_APART, min(MOST_SECONDS_APART, ttl / 4))


def keys_live(ttl: float) -> float:
    """How long a store that expires keys on its own (Redis) keeps them after a request: one
    sweep past the ttl, so that the sweep has taken the session out of the indexes first (an
    index entry whose keys are gone costs every listing a skip)."""
    return ttl + interval(ttl) if ttl > 0 else 0


async def sweep(store: Store, ttl: float, metrics: Metrics) -> None:
    """Forever, until cancelled."""
    while True:
        await asyncio.sleep(interval(ttl))
        try:
            gone = await store.expire(time.time() - ttl)
        except Exception as exc:  # the store is away for a while: try again next time
            log.warning("could not expire idle sessions: %s: %s", type(exc).__name__, exc)
            continue
        if gone:
            metrics.sessions_expired(gone)
            log.info("forgot %d sessions idle for more than %g s", gone, ttl)
