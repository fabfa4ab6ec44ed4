"""Session churn: sessions created and abandoned for a sustained period, with a short --session-ttl.

One proxy process (one worker) per store (SQLite, Redis, and memory:// with MEMORY_TIMES as many
sessions, as it takes them faster), `--session-ttl 5`. Every request is the first scripted
turn of a session of its own (a fresh x-session-affinity id, never used again), so each one creates
a session that the sweeper must later forget. A load generator in a process of its own drives
`sessions` of them through at concurrency 8 while this process samples, every second:
the proxy's resident memory, `replay_proxy_sessions` and `replay_proxy_sessions_expired_total`
from /metrics, the median of a few `GET /replay/sessions?limit=100`, and the store's size (the
SQLite file and its WAL; Redis's used_memory). After the load, one ttl and two sweeps more: every
session created should then be counted as expired.

"Flat": after a warm-up of three ttls (the store fills up to about a ttl's worth of sessions, then
loses as many as it gains), the samples of the first and the last quarter of the run are compared
(medians); memory and list latency must not grow with the sessions that went through. Also given:
what RSS and the store grew by per session, from the first sample after warm-up to the end. With
`baseline`, the same load with `--session-ttl 0` (shorter), to show what the ttl fixes.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import median
from typing import Any
from urllib.parse import urlsplit

import redis

from bench.procs import proxy, rss_bytes
from proxy.sessions.expiry import interval

TTL = 5.0
CONCURRENCY = 8
SAMPLE_EVERY = 1.0  # seconds between two samples
LIST_CALLS = 5  # list requests per sample; their median is the sample's latency
WARMUP_TTLS = 3
MEMORY_TIMES = 2.5  # the memory store takes sessions ~5x faster: this many times more, to last
MB = 1 << 20
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
BODY = json.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "the task"}], "tools": TOOLS}
).encode()

# what a run must show (the targets of the suite)
RSS_MOST = 1.2  # last quarter's RSS over the first quarter's
LIST_MOST = 1.5  # last quarter's list p50 over the first quarter's
KEPT_MOST_TTLS = 1.5  # sessions kept at the end of the load, in ttls of sessions at the run's rate


def _trajectory(path: Path) -> None:
    call = {"id": "c0", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "the task"},
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c0", "content": "ok"},
                {"role": "assistant", "content": "done"},
            ]
        )
    )


def _drive(url: str, tag: str, sessions: int, concurrency: int, out: Any) -> None:
    """In a process of its own, so that the sampler's timings do not wait on the generator."""
    import uvloop

    from bench.loadgen import run

    stats = uvloop.run(
        run(
            url + "/chat/completions",
            lambda i: BODY,
            concurrency=concurrency,
            requests=sessions,
            headers=lambda i: {"x-session-affinity": f"{tag}-{i}"},
        )
    )
    out.put({**stats.summary(), "seconds": round(stats.seconds, 1)})


class Probe:
    """The proxy seen from outside, on one keep-alive connection: metrics, list latency, memory."""

    def __init__(self, url: str, pid: int, store: str, redis_url: str | None) -> None:
        parts = urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
        self.pid = pid
        self.db = Path(store.removeprefix("sqlite:///")) if store.startswith("sqlite:") else None
        self.redis = redis.Redis.from_url(redis_url) if redis_url else None

    def get(self, path: str) -> bytes:
        self.connection.request("GET", path)
        answer = self.connection.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"GET {path}: {answer.status} {body[:200]!r}")
        return body

    def metrics(self) -> dict[str, float]:
        found = {"requests": 0.0}
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith("replay_proxy_requests_total{"):
                found["requests"] += float(line.rsplit(" ", 1)[1])
            elif line.startswith(
                ("replay_proxy_sessions ", "replay_proxy_sessions_expired_total ")
            ):
                name, value = line.split()
                found[name] = float(value)
        return found

    def list_ms(self) -> float:
        took = []
        for _ in range(LIST_CALLS):
            started = time.perf_counter()
            page = json.loads(self.get("/replay/sessions?limit=100"))
            took.append(time.perf_counter() - started)
            assert page["object"] == "list", page
        return median(took) * 1000

    def store_bytes(self) -> int | None:
        if self.db is not None:
            return sum(
                p.stat().st_size
                for p in (self.db, Path(f"{self.db}-wal"))
                if p.exists()  # the WAL comes and goes with checkpoints
            )
        if self.redis is not None:
            return int(self.redis.info("memory")["used_memory"])
        return None

    def tasks(self) -> int:
        return int(json.loads(self.get("/healthz"))["tasks"])

    def sample(self, started: float) -> dict[str, Any]:
        metrics = self.metrics()
        return {
            "t": round(time.perf_counter() - started, 2),
            "through": int(metrics["requests"]),
            "kept": int(metrics.get("replay_proxy_sessions", 0)),
            "expired": int(metrics.get("replay_proxy_sessions_expired_total", 0)),
            "rss_mb": round(rss_bytes(self.pid) / MB, 1),
            "list_ms": round(self.list_ms(), 3),
            "store_mb": None if (size := self.store_bytes()) is None else round(size / MB, 2),
        }

    def close(self) -> None:
        self.connection.close()
        if self.redis is not None:
            self.redis.close()


def _quarters(samples: list[dict[str, Any]], key: str) -> tuple[float, float] | None:
    """Medians of `key` over the first and the last quarter of the samples."""
    values = [s[key] for s in samples if s[key] is not None]
    if len(values) < 4:
        return None
    n = len(values) // 4
    return median(values[:n]), median(values[-n:])


def _ratio(pair: tuple[float, float] | None) -> float | None:
    return round(pair[1] / pair[0], 3) if pair and pair[0] else None


def measure(
    store: str,
    trajectory: Path,
    *,
    sessions: int,
    ttl: float,
    redis_url: str | None = None,
    tag: str = "churn",
) -> dict[str, Any]:
    """One proxy on `store`; `sessions` fresh sessions through it; what it kept and held."""
    args = ["--store", store, "--trajectory", str(trajectory), "--session-ttl", f"{ttl:g}"]
    with proxy(*args) as (url, pid):
        base = url.removesuffix("/v1")
        probe = Probe(base, pid, store, redis_url)
        try:
            tasks_before = probe.tasks()
            spawn = multiprocessing.get_context("spawn")
            out = spawn.Queue()
            load = spawn.Process(target=_drive, args=(url, tag, sessions, CONCURRENCY, out))
            started = time.perf_counter()
            load.start()
            samples = [probe.sample(started)]
            while load.is_alive():
                wake = started + len(samples) * SAMPLE_EVERY
                while load.is_alive() and time.perf_counter() < wake:
                    time.sleep(0.05)
                if load.is_alive():
                    samples.append(probe.sample(started))
            stats = out.get(timeout=60)
            load.join()
            end = probe.sample(started)
            drained = None
            if ttl > 0:  # one ttl and two sweeps later, every session is gone
                time.sleep(ttl + 2 * interval(ttl))
                drained = probe.sample(started)
            tasks_after = probe.tasks()
        finally:
            probe.close()
    warm = [s for s in samples if s["t"] >= max(WARMUP_TTLS * ttl, SAMPLE_EVERY)]
    rss, listed, size = (_quarters(warm, k) for k in ("rss_mb", "list_ms", "store_mb"))
    through = _quarters(warm, "through")
    created = stats["requests"] + stats["errors"]
    first = warm[0] if warm else end

    def per_session(key: str) -> int | None:
        """What `key` grew by per session from the first sample after warm-up to the end."""
        through: int = end["through"] - first["through"]
        if first[key] is None or through <= 0:
            return None
        grown: float = (end[key] - first[key]) * MB
        return round(grown / through)

    return {
        "store": store.split(":", 1)[0],
        "ttl": ttl,
        "sessions": created,
        "errors": stats["errors"],
        "seconds": stats["seconds"],
        "rate": stats["rps"],
        "request_p50_ms": stats["p50_ms"],
        "request_p99_ms": stats["p99_ms"],
        "through_first_quarter": through[0] if through else None,
        "through_last_quarter": through[1] if through else None,
        "rss_mb_first": rss[0] if rss else None,
        "rss_mb_last": rss[1] if rss else None,
        "rss_ratio": _ratio(rss),
        "rss_mb_peak": max(s["rss_mb"] for s in [*samples, end]),
        "list_ms_first": round(listed[0], 3) if listed else None,
        "list_ms_last": round(listed[1], 3) if listed else None,
        "list_ratio": _ratio(listed),
        "store_mb_first": size[0] if size else None,
        "store_mb_last": size[1] if size else None,
        "store_ratio": _ratio(size),
        "growth_from_s": first["t"],
        "rss_bytes_per_session": per_session("rss_mb"),
        "store_bytes_per_session": per_session("store_mb"),
        "kept_peak": max(s["kept"] for s in [*samples, end]),
        "kept_at_end": end["kept"],
        "expired_at_end": end["expired"],
        "kept_after_drain": drained["kept"] if drained else None,
        "expired_after_drain": drained["expired"] if drained else None,
        "tasks_before": tasks_before,
        "tasks_after": tasks_after,
        "samples": [*samples, end, *([drained] if drained else [])],
    }


def met(r: dict[str, Any]) -> dict[str, bool]:
    """The suite's targets for one store's churn run."""
    bound = KEPT_MOST_TTLS * r["ttl"] * r["rate"]
    return {
        "rss": r["rss_ratio"] is not None and r["rss_ratio"] <= RSS_MOST,
        "list": r["list_ratio"] is not None and r["list_ratio"] <= LIST_MOST,
        "kept": r["kept_at_end"] <= bound,
        "expired": r["expired_after_drain"] == r["sessions"] and r["kept_after_drain"] == 0,
    }


@contextmanager
def _folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def suite(
    redis_url: str | None,
    *,
    sessions: int = 200_000,
    baseline: int = 0,
    baseline_redis: bool = False,
    memory: bool = True,
) -> dict[str, Any]:
    """`sessions` of churn on SQLite and Redis (and MEMORY_TIMES as many on memory://, with
    `memory`), then, with `baseline` > 0, that many with --session-ttl 0 on each (on Redis only if
    `baseline_redis`: there its sessions stay)."""
    results: dict[str, Any] = {"ttl": TTL, "concurrency": CONCURRENCY, "churn": {}, "baseline": {}}
    with _folder() as folder:
        trajectory = folder / "t.json"
        _trajectory(trajectory)
        runs: list[tuple[str, str, str, str | None]] = []  # kind, name, store URL, redis URL
        for kind in ("churn", "baseline"):
            if kind == "baseline" and not baseline:
                continue
            if memory:
                runs.append((kind, "memory", "memory://", None))
            runs.append((kind, "sqlite", f"sqlite:///{folder}/{kind}.db", None))
            if redis_url and (kind == "churn" or baseline_redis):
                runs.append((kind, "redis", redis_url, redis_url))
        for kind, name, store, client in runs:
            ttl = TTL if kind == "churn" else 0.0
            count = sessions if kind == "churn" else baseline
            if name == "memory":
                count = int(count * MEMORY_TIMES)
            print(f"churn: {kind} on {name}, {count} sessions, --session-ttl {ttl:g}", flush=True)
            r = measure(store, trajectory, sessions=count, ttl=ttl, redis_url=client, tag=kind)
            if kind == "churn":
                r["met"] = met(r)
            results[kind][name] = r
            print(row(name, r), flush=True)
    return results


def _f(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def row(name: str, r: dict[str, Any]) -> str:
    store = (
        f"  store {_f(r['store_mb_first'], '.1f')}->{_f(r['store_mb_last'], '.1f')} MB"
        if r["store_mb_first"] is not None
        else ""
    )
    growth = f"  growth/session: RSS {_f(r['rss_bytes_per_session'], 'd')} B" + (
        f", store {_f(r['store_bytes_per_session'], 'd')} B"
        if r["store_bytes_per_session"] is not None
        else ""
    )
    return (
        f"  {name:<7} {r['sessions']:>7} sessions  {r['rate']:>6.0f}/s  "
        f"RSS {_f(r['rss_mb_first'], '.1f')}->{_f(r['rss_mb_last'], '.1f')} MB "
        f"({_f(r['rss_ratio'], '.2f')}x)  "
        f"list p50 {_f(r['list_ms_first'], '.2f')}->{_f(r['list_ms_last'], '.2f')} ms "
        f"({_f(r['list_ratio'], '.2f')}x)  "
        f"kept {r['kept_at_end']} (peak {r['kept_peak']})  expired {r['expired_at_end']}"
        + (
            f", after drain {r['expired_after_drain']} / kept {r['kept_after_drain']}"
            if r["expired_after_drain"] is not None
            else ""
        )
        + store
        + growth
    )


def table(results: dict[str, Any]) -> str:
    lines = [
        f"session churn (one worker, concurrency {results['concurrency']}, fresh session per "
        f"request, --session-ttl {results['ttl']:g}; first vs last quarter after "
        f"{WARMUP_TTLS} ttls)"
    ]
    lines += [row(name, r) for name, r in results["churn"].items()]
    if results["baseline"]:
        lines.append("the same with --session-ttl 0")
        lines += [row(name, r) for name, r in results["baseline"].items()]
    return "\n".join(lines)
