"""Redis session state: for several proxy replicas on several hosts.

Redis is the distributed engine: each update is optimistic (read the session, change it, then a
script writes it only if the stored value is still the one read, else read again: two round trips,
where WATCH/MULTI/EXEC took three), and a trajectory is claimed with SET NX. Keys live under a
prefix so one Redis can serve other things too.

With a ttl, every key of a session (its state, script, claims and the owners of what it claimed)
expires that long after its last request, each write setting the time again; two sorted sets
index the sessions by creation (listing) and by last request (`expire` takes out of both what
Redis let go, with whatever of it is left).
"""

from __future__ import annotations

import time
from typing import Any, cast

import orjson
import redis.asyncio as aioredis

from proxy.store.state import (
    EVENTS_KEPT,
    Change,
    Event,
    EventOf,
    SessionState,
    cursor_of,
    event_for,
    read_cursor,
)

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

# compare-and-set of a session: KEYS session, sessions index, events list, last-seen index,
# script, claims; ARGV the value read ('' when there was none: a stored session is never empty),
# the new value, the session id, its creation time, the event ('' for none), how many events to
# keep, the time of this request, the ttl in ms (0: none) and the owner key prefix.
# 1 when written, else 0.
_CAS = """
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
local ttl = tonumber(ARGV[8])
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
  redis.call('PEXPIRE', KEYS[5], ttl)
  redis.call('PEXPIRE', KEYS[6], ttl)
  for _, name in ipairs(redis.call('SMEMBERS', KEYS[6])) do
    redis.call('PEXPIRE', ARGV[9] .. name, ttl)
  end
else
  redis.call('SET', KEYS[1], ARGV[2])
end
if ARGV[1] == '' then  -- new, or back after Redis let its keys go: listed where it is now
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[3])
else
  redis.call('ZADD', KEYS[2], 'NX', ARGV[4], ARGV[3])
end
redis.call('ZADD', KEYS[4], ARGV[7], ARGV[3])
if ARGV[5] ~= '' then
  redis.call('LPUSH', KEYS[3], ARGV[5])
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[6]) - 1)
end
return 1
"""

# forget up to ARGV[3] sessions last seen before ARGV[1]: KEYS sessions index, last-seen index;
# ARGV the cutoff, the key prefix, the batch size. How many went.
_EXPIRE = """
local gone = redis.call('ZRANGE', KEYS[2], '-inf', '(' .. ARGV[1], 'BYSCORE', 'LIMIT', 0, ARGV[3])
local prefix = ARGV[2]
for _, session in ipairs(gone) do
  local claims = prefix .. 'claims:' .. session
  for _, name in ipairs(redis.call('SMEMBERS', claims)) do
    local owner = prefix .. 'owner:' .. name
    if redis.call('GET', owner) == session then redis.call('DEL', owner) end
  end
  redis.call('DEL', claims, prefix .. 'script:' .. session, prefix .. 'session:' .. session)
  redis.call('ZREM', KEYS[1], session)
  redis.call('ZREM', KEYS[2], session)
end
return #gone
"""
EXPIRED_AT_ONCE = 1000  # sessions per script call: Redis serves nothing else while one runs

# KEYS sessions index, last-seen index; ARGV now: a last-seen entry for any session without one
_SEEN_NOW = """
if redis.call('ZCARD', KEYS[2]) >= redis.call('ZCARD', KEYS[1]) then return 0 end
for _, session in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  redis.call('ZADD', KEYS[2], 'NX', ARGV[1], session)
end
return 1
"""


def _score(value: float) -> float | str:
    """A score bound as Redis reads it: +inf and -inf by name."""
    if value in (float("inf"), float("-inf")):
        return "+inf" if value > 0 else "-inf"
    return value


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStore:
    def __init__(self, url: str, *, prefix: str = PREFIX, ttl: float = 0) -> None:
        self.url = url
        self.prefix = prefix
        self.ttl_ms = int(ttl * 1000)
        # a blocking pool: under load a request waits for a free connection instead of failing
        pool = aioredis.BlockingConnectionPool.from_url(url, max_connections=128, timeout=30)
        self._redis = aioredis.Redis(connection_pool=pool)
        self._cas = self._redis.register_script(_CAS)
        self._expire = self._redis.register_script(_EXPIRE)

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
            self._key("index", "seen"),
            self._key("script", session),
            self._key("claims", session),
        ]
        owners = self._key("owner", "")
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
            args = [raw or b"", new, session, state.created, line, EVENTS_KEPT, now, self.ttl_ms]
            args.append(owners)
            if await self._cas(keys=keys, args=args):
                return state
            # another replica changed the session in between: read it again

    async def events(self, limit: int = 200) -> list[Event]:
        if limit <= 0:
            return []
        raws = await self._redis.lrange(self._key("index", "events"), 0, limit - 1)  # newest first
        return [orjson.loads(raw) for raw in reversed(raws)]

    async def page(
        self, after: str | None, limit: int, *, newest_first: bool = False
    ) -> tuple[list[SessionState], str | None]:
        index = self._key("index", "sessions")
        edge = float("inf") if newest_first else float("-inf")
        at, last = read_cursor(after) if after is not None else (edge, "")
        found: list[SessionState] = []
        offset = 0
        while len(found) <= limit:  # one more than asked: is there a next page?
            batch = await self._redis.zrange(
                index,
                _score(at),
                "-inf" if newest_first else "+inf",
                desc=newest_first,
                byscore=True,
                offset=offset,
                num=limit + 1,
                withscores=True,
            )
            if not batch:
                break
            offset += len(batch)
            # members of the cursor's own time sort by id: those up to it were listed
            pairs = cast(list[tuple[bytes, float]], batch)
            if newest_first:
                ids = [_text(m) for m, score in pairs if score < at or _text(m) < last]
            else:
                ids = [_text(m) for m, score in pairs if score > at or _text(m) > last]
            raws = await self._redis.mget([self._key("session", i) for i in ids]) if ids else []
            found += [SessionState.from_dict(orjson.loads(r)) for r in raws if r is not None]
        more = len(found) > limit
        found = found[:limit]
        return found, (cursor_of(found[-1]) if more else None)

    async def count(self, since: float | None = None) -> int:
        seen = self._key("index", "seen")
        if since is None:
            return int(await self._redis.zcard(seen))
        return int(await self._redis.zcount(seen, since, "+inf"))

    async def expire(self, before: float) -> int:
        keys = [self._key("index", "sessions"), self._key("index", "seen")]
        gone = 0
        while True:
            removed = int(
                await self._expire(keys=keys, args=[before, self.prefix, EXPIRED_AT_ONCE])
            )
            gone += removed
            if removed < EXPIRED_AT_ONCE:
                return gone

    async def delete(self, session: str) -> bool:
        claims = self._key("claims", session)
        names = await self._redis.smembers(claims)
        async with self._redis.pipeline(transaction=True) as pipe:
            for name in names:
                pipe.delete(self._key("owner", _text(name)))
            pipe.delete(claims, self._key("script", session))
            pipe.zrem(self._key("index", "sessions"), session)
            pipe.zrem(self._key("index", "seen"), session)
            pipe.delete(self._key("session", session))
            results = await pipe.execute()
        return bool(results[-1])

    async def claim(self, name: str, session: str) -> str:
        key = self._key("owner", name)
        ttl = self.ttl_ms or None
        if await self._redis.set(key, session, nx=True, px=ttl):
            claims = self._key("claims", session)
            await self._redis.sadd(claims, name)
            if ttl:
                await self._redis.pexpire(claims, ttl)
            return session
        owner = await self._redis.get(key)
        return _text(owner) if owner is not None else await self.claim(name, session)

    async def owner(self, name: str) -> str | None:
        owner = await self._redis.get(self._key("owner", name))
        return None if owner is None else _text(owner)

    async def put_script(self, session: str, data: bytes) -> None:
        await self._redis.set(self._key("script", session), data, px=self.ttl_ms or None)

    async def get_script(self, session: str) -> bytes | None:
        raw = await self._redis.get(self._key("script", session))
        return None if raw is None else raw if isinstance(raw, bytes) else raw.encode()

    async def next_sequence(self, name: str, *, at_least: int = 0) -> int:
        value = await self._redis.eval(_BUMP, 1, self._key("counter", name), at_least)
        return int(value)

    async def check(self) -> None:
        await self._redis.ping()
        # sessions of a proxy from before expiry have no last-seen entry: they count as seen now
        await self._redis.eval(
            _SEEN_NOW, 2, self._key("index", "sessions"), self._key("index", "seen"), time.time()
        )

    async def close(self) -> None:
        await self._redis.aclose()
        await self._redis.connection_pool.disconnect()
