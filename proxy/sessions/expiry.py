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


def interval(ttl: float) -> float:
    return min(MOST_SECONDS_APART, ttl / 4)


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
