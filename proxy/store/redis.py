"""Redis session state: for several proxy replicas on several hosts.

Redis is the distributed engine: each update is optimistic (read the session, change it, then a
script writes it only if the stored value is still the one read, else read again: two round trips,
where WATCH/MULTI/EXEC took three), and a trajectory is claimed with SET NX. Keys live under a
prefix so one Redis can serve other things too.
"""

from __future__ import annotations

from typing import Any

import orjson
import redis.asyncio as aioredis

from proxy.store.state import EVENTS_KEPT, Change, Event, EventOf, SessionState, event_for

PREFIX = "replay-proxy:"


# max(current, at_least) + 1, atomically
_BUMP = """
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if floor > v then v = floor end
v = v + 1
redis.call('SET', KEYS[1], v)
return v
"""

# compare-and-set of a session: KEYS session, sessions index, events list; ARGV the value read
# ('' when there was none: a stored session is never empty), the new value, the session id, its
# creation time, the event ('' for none) and how many events to keep. 1 when written, else 0.
_CAS = """
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', ARGV[4], ARGV[3])
if ARGV[5] ~= '' then
  redis.call('LPUSH', KEYS[3], ARGV[5])
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[6]) - 1)
end
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStore:
    def __init__(self, url: str, *, prefix: str = PREFIX) -> None:
        self.url = url
        self.prefix = prefix
        # a blocking pool: under load a request waits for a free connection instead of failing
        pool = aioredis.BlockingConnectionPool.from_url(url, max_connections=128, timeout=30)
        self._redis = aioredis.Redis(connection_pool=pool)
        self._cas = self._redis.register_script(_CAS)

    def _key(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    async def get(self, session: str) -> SessionState | None:
        raw = await self._redis.get(self._key("session", session))
        return None if raw is None else SessionState.from_dict(orjson.loads(raw))

    async def update(
        self, session: str, change: Change, *, now: float, event: Event | EventOf | None = None
    ) -> SessionState:
        keys = [
            self._key("session", session),
            self._key("index", "sessions"),
            self._key("index", "events"),
        ]
        while True:
            raw = await self._redis.get(keys[0])
            if raw is None:
                state = SessionState(id=session, created=now, last_seen=now)
            else:
                state = SessionState.from_dict(orjson.loads(raw))
            change(state)
            state.last_seen = now
            new = orjson.dumps(state.to_dict())
            logged = event_for(event, state)
            line = orjson.dumps(logged) if logged is not None else b""
            args = [raw or b"", new, session, state.created, line, EVENTS_KEPT]
            if await self._cas(keys=keys, args=args):
                return state
            # another replica changed the session in between: read it again

    async def events(self, limit: int = 200) -> list[Event]:
        if limit <= 0:
            return []
        raws = await self._redis.lrange(self._key("index", "events"), 0, limit - 1)  # newest first
        return [orjson.loads(raw) for raw in reversed(raws)]

    async def sessions(self) -> list[SessionState]:
        ids = await self._redis.zrange(self._key("index", "sessions"), 0, -1)
        if not ids:
            return []
        raws = await self._redis.mget([self._key("session", _text(i)) for i in ids])
        return [SessionState.from_dict(orjson.loads(r)) for r in raws if r is not None]

    async def delete(self, session: str) -> bool:
        claims = self._key("claims", session)
        names = await self._redis.smembers(claims)
        async with self._redis.pipeline(transaction=True) as pipe:
            for name in names:
                pipe.delete(self._key("owner", _text(name)))
            pipe.delete(claims, self._key("script", session))
            pipe.zrem(self._key("index", "sessions"), session)
            pipe.delete(self._key("session", session))
            results = await pipe.execute()
        return bool(results[-1])

    async def claim(self, name: str, session: str) -> str:
        key = self._key("owner", name)
        if await self._redis.set(key, session, nx=True):
            await self._redis.sadd(self._key("claims", session), name)
            return session
        owner = await self._redis.get(key)
        return _text(owner) if owner is not None else await self.claim(name, session)

    async def owner(self, name: str) -> str | None:
        owner = await self._redis.get(self._key("owner", name))
        return None if owner is None else _text(owner)

    async def put_script(self, session: str, data: bytes) -> None:
        await self._redis.set(self._key("script", session), data)

    async def get_script(self, session: str) -> bytes | None:
        raw = await self._redis.get(self._key("script", session))
        return None if raw is None else raw if isinstance(raw, bytes) else raw.encode()

    async def next_sequence(self, name: str, *, at_least: int = 0) -> int:
        value = await self._redis.eval(_BUMP, 1, self._key("counter", name), at_least)
        return int(value)

    async def check(self) -> None:
        await self._redis.ping()

    async def close(self) -> None:
        await self._redis.aclose()
        await self._redis.connection_pool.disconnect()
