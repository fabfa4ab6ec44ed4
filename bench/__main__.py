"""python -m bench [suites...] [--repeat N] [--seconds S] [--redis URL] [--out FILE]

Runs the suites (default: all), prints each figure as a ratio to its reference with the target
next to it, and writes everything as JSON (bench/results/<time>.json) for later comparison.
Needs wrk, nginx and redis-server (Debian packages) on the machine; the stores and churn suites
start their own redis-server unless given --redis. The machine is noisy: figures are medians of
`--repeat` runs, and CPU milliseconds per request of the proxy's own process are given beside
requests/s, as they vary less.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path
from statistics import median
from typing import Any

from bench import (
    churn,
    clients,
    footprint,
    heavy,
    peers,
    procs,
    resumes,
    rollouts,
    sessions,
    sidebyside,
    slow,
    sockets,
    stores,
    throughput,
    tokens,
)

SUITES = (
    "throughput",
    "footprint",
    "slow",
    "stores",
    "clients",
    "churn",
    "rollouts",
    "resumes",
    "peers",
    "heavy",
    "sockets",
    "tokens",
    "sessions",
)


def _rps(results: dict[str, Any], key: str) -> float:
    return float(results[key]["rps"])


def targets(
    t: dict[str, Any],
    f: dict[str, Any] | None,
    s: dict[str, Any] | None,
    churned: dict[str, Any] | None = None,
) -> list[tuple[str, str, str, bool]]:
    """(what, measured, target, met) for every target (the HTTP-stack issue's where it set one)."""
    rows: list[tuple[str, str, str, bool]] = []
    if t:
        for c in (8, 64):
            ratio = _rps(t, f"forwarded/stream/c{c}") / _rps(t, f"nginx/stream/c{c}")
            rows.append(
                (
                    f"forwarded streams (64 chunks), c={c}, vs nginx",
                    f"{ratio:.2f}x",
                    ">= 0.6x",
                    ratio >= 0.6,
                )
            )
        added = t["ttfb_ms/forwarded"] - t["ttfb_ms/direct"]
        rows.append(
            (
                "forwarded stream, time to first chunk at c=1, over direct",
                f"+{added:.2f} ms",
                "<= 1 ms",
                added <= 1.0,
            )
        )
        ratio = _rps(t, "forwarded/json/c8") / _rps(t, "nginx/json/c8")
        rows.append(
            ("forwarded non-streaming, c=8, vs nginx", f"{ratio:.3f}x", ">= 0.12x", ratio >= 0.12)
        )
        for kind, reference in (("json", "bare FastAPI"), ("stream", "sse-starlette")):
            worst = min(
                _rps(t, f"scripted/{kind}/c{c}") / _rps(t, f"bare/{kind}/c{c}")
                for c in throughput.CONCURRENCY
            )
            rows.append(
                (
                    f"scripted {kind}, vs the same bytes from {reference} (worst of c=1,8,64)",
                    f"{worst:.2f}x",
                    ">= 0.8x",
                    worst >= 0.8,
                )
            )
        for kind, litellm in (("json", 82), ("stream", 20)):
            ratio = _rps(t, f"scripted/{kind}/c1") / litellm
            rows.append(
                (
                    f"scripted {kind}, c=1, vs LiteLLM mock_response ({litellm}/s)",
                    f"{ratio:.0f}x",
                    ">= 50x",
                    ratio >= 50,
                )
            )
    if f:
        rows.append(
            (
                "10 MB trajectory load, vs json.loads",
                f"{f['load']['ratio']:.2f}x",
                "<= 3x",
                f["load"]["ratio"] <= 3,
            )
        )
        per = f["memory"]["bytes_per_session"]
        rows.append(
            (
                "memory per session (10,000 sessions, 100 trajectories)",
                f"{per} B",
                "<= 2048 B",
                per <= 2048,
            )
        )
        rows.append(
            (
                "a trajectory bound to many sessions is held once",
                str(f["shared"]),
                "True",
                bool(f["shared"]),
            )
        )
    if s:
        held = s["streams_within_budget"]
        rows.append(
            (
                "slow streams held by one worker within +10 ms p99 gap (nginx in brackets)",
                f"{held:g} ({s['nginx_streams_within_budget']:g})",
                ">= 500",
                held >= 500,
            )
        )
        cost = s["cpu_vs_nginx"]
        rows.append(
            (
                f"CPU per forwarded slow-stream event at {slow.COUNTS[0]} streams, vs nginx's",
                f"{cost:.2f}x",
                "<= 4x",
                cost <= 4,
            )
        )
        if "workers" in s:
            more = s["workers"]["streams_within_budget"]
            rows.append(
                (
                    f"slow streams held by {s['workers']['count']} workers (one: {held:g})",
                    f"{more:g}",
                    "more than one worker holds",
                    more > held,
                )
            )
    if churned:
        rows += churn_targets(churned)
    return rows


def churn_targets(c: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """The churn suite's: per store, memory and list latency flat, sessions kept within the ttl."""
    rows: list[tuple[str, str, str, bool]] = []
    for name, r in c["churn"].items():
        met = r["met"]
        under = f"{name}, {r['sessions']:,} sessions at ttl {r['ttl']:g} s"
        rows.append(
            (
                f"{under}: RSS, last quarter vs first",
                f"{_or_none(r['rss_ratio'])}x",
                f"<= {churn.RSS_MOST}x",
                met["rss"],
            )
        )
        rows.append(
            (
                f"{under}: list p50, last quarter vs first",
                f"{_or_none(r['list_ratio'])}x",
                f"<= {churn.LIST_MOST}x",
                met["list"],
            )
        )
        kept = r["kept_at_end"] / (r["ttl"] * r["rate"]) if r["rate"] else float("inf")
        rows.append(
            (
                f"{under}: kept at the end, in ttls of sessions",
                f"{kept:.2f}",
                f"<= {churn.KEPT_MOST_TTLS}",
                met["kept"],
            )
        )
        rows.append(
            (
                f"{under}: expired once idle a ttl, of those created",
                f"{r['expired_after_drain']}/{r['sessions']}",
                "all",
                met["expired"],
            )
        )
    return rows


def _or_none(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _median_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each numeric figure over repeated runs of the throughput suite."""
    merged: dict[str, Any] = {}
    for key, first in runs[0].items():
        if isinstance(first, dict):
            merged[key] = {
                k: median(r[key][k] for r in runs)
                if isinstance(v, int | float) and v is not None
                else v
                for k, v in first.items()
            }
        else:
            merged[key] = median(r[key] for r in runs)
    return merged


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench")
    # no `choices` here: argparse checks an empty list against them and refuses a bare run
    parser.add_argument("suites", nargs="*", metavar="suite", help=f"default: all of {SUITES}")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the median is kept")
    parser.add_argument("--seconds", type=int, default=4, help="length of each wrk run")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="slow suite: also run it with this many proxy workers on a SQLite store, to show "
        "that workers add capacity (1: one worker only)",
    )
    parser.add_argument(
        "--redis", metavar="URL", help="a Redis server for the stores suite (default: start one)"
    )
    parser.add_argument(
        "--sessions",
        type=int,
        default=200_000,
        help="churn suite: fresh sessions driven through each store (default 200000; memory:// "
        "gets 2.5 times as many)",
    )
    parser.add_argument(
        "--baseline",
        type=int,
        default=50_000,
        help="churn suite: then this many on each store with --session-ttl 0, for comparison "
        "(default 50000; 0: none; not on a --redis server, where they would stay)",
    )
    parser.add_argument(
        "--peers",
        metavar="NAMES",
        help=f"peers suite: only these mock servers, comma-separated (default: all of "
        f"{', '.join(p.name for p in peers.PEERS)})",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("bench/results") / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.suites) - set(SUITES))
    if unknown:
        parser.error(f"unknown suite {', '.join(unknown)}: choose from {', '.join(SUITES)}")
    args.suites = args.suites or list(SUITES)
    if args.peers is not None:
        args.peers = args.peers.split(",")
        strangers = sorted(set(args.peers) - set(peers.BY_NAME))
        if strangers:
            parser.error(
                f"unknown peer {', '.join(strangers)}: choose from {', '.join(peers.BY_NAME)}"
            )
    return args


def main() -> None:
    args = arguments()
    results: dict[str, Any] = {
        "machine": {
            "cpus": len(os.sched_getaffinity(0)),
            "python": platform.python_version(),
        }
    }
    if "throughput" in args.suites:
        runs = [throughput.run_once(args.seconds) for _ in range(args.repeat)]
        results["throughput"] = _median_runs(runs)
        results["throughput_runs"] = runs
        print(throughput.table(results["throughput"]))
    if "footprint" in args.suites:
        results["footprint"] = {
            "load": footprint.load(),
            "request": footprint.request(),
            "memory": footprint.memory(),
            "shared": footprint.shared_script(),
        }
        print(json.dumps(results["footprint"], indent=2))
    if "slow" in args.suites:
        runs = [slow.suite(workers=1) for _ in range(args.repeat)]
        results["slow"] = {
            "streams_within_budget": median(r["streams_within_budget"] for r in runs),
            "nginx_streams_within_budget": median(r["nginx_streams_within_budget"] for r in runs),
            "cpu_vs_nginx": median(slow.cpu_vs_nginx(r) for r in runs),
            "runs": runs,
        }
        print(slow.table(runs))
        if args.workers > 1:
            more = [slow.suite(workers=args.workers) for _ in range(args.repeat)]
            results["slow"]["workers"] = {
                "count": args.workers,
                "streams_within_budget": median(r["streams_within_budget"] for r in more),
                "runs": more,
            }
            print(slow.table(more))
    if "stores" in args.suites:
        if args.redis:
            results["stores"] = stores.suite(args.redis)
        elif shutil.which("redis-server"):
            with procs.redis_server() as url:
                results["stores"] = stores.suite(url)
        else:
            print("stores: no --redis and no redis-server installed: the redis store is left out")
            results["stores"] = stores.suite(None)
        print(stores.table(results["stores"]))
    if "clients" in args.suites:
        results["clients"] = clients.suite(args.seconds)
        print(clients.table(results["clients"]))
    if "churn" in args.suites:
        options = {"sessions": args.sessions, "baseline": args.baseline}
        if args.redis:
            results["churn"] = churn.suite(args.redis, **options)
        elif shutil.which("redis-server"):
            with procs.redis_server() as url:
                results["churn"] = churn.suite(url, baseline_redis=True, **options)
        else:
            print("churn: no --redis and no redis-server installed: the redis store is left out")
            results["churn"] = churn.suite(None, **options)
        print(churn.table(results["churn"]))
    if "rollouts" in args.suites:
        if not shutil.which("redis-server") and not args.redis:
            print("rollouts: needs a Redis server (its two workers share one): left out")
        elif args.redis:
            results["rollouts"] = rollouts.suite(args.redis)
        else:
            with procs.redis_server() as url:
                results["rollouts"] = rollouts.suite(url)
        if "rollouts" in results:
            print(json.dumps(results["rollouts"], indent=2))
    if "resumes" in args.suites:
        if not shutil.which("redis-server") and not args.redis:
            print("resumes: needs a Redis server (its two workers share one): left out")
        elif args.redis:
            results["resumes"] = resumes.suite(args.redis)
        else:
            with procs.redis_server() as url:
                results["resumes"] = resumes.suite(url)
        if "resumes" in results:
            print(json.dumps(results["resumes"], indent=2))
    if "peers" in args.suites:
        results["peers"] = sidebyside.suite(args.seconds, args.repeat, args.peers)
        print(sidebyside.table(results["peers"]))
    if "heavy" in args.suites:
        results["heavy"] = heavy.suite()
        print(heavy.table(results["heavy"]))
    if "sockets" in args.suites:
        results["sockets"] = sockets.suite()
        print(sockets.table(results["sockets"]))
    if "tokens" in args.suites:
        results["tokens"] = tokens.suite(max(args.repeat, 5))
        print(tokens.table(results["tokens"]))
    if "sessions" in args.suites:
        results["sessions"] = sessions.suite()
        print(sessions.table(results["sessions"]))
    rows = targets(
        results.get("throughput", {}),
        results.get("footprint"),
        results.get("slow"),
        results.get("churn"),
    )
    if "rollouts" in results:
        r = results["rollouts"]
        rows.append(
            (
                f"{r['rollouts']} rollouts (K={r['turns_scripted']}, then live): none crossed",
                f"{r['crossed']} crossed, {r['errors']} errors",
                "0 and 0",
                rollouts.met(r),
            )
        )
    if "resumes" in results:
        r = results["resumes"]
        rows.append(
            (
                f"{r['rollouts']} fenced resumes with a child (K={r['handoff_turn']}): all "
                "restored, none crossed",
                f"{r['verdicts'].get('restored', 0)} restored, {r['crossed']} crossed, "
                f"{r['errors']} errors",
                f"{r['rollouts']}, 0, 0",
                resumes.met(r),
            )
        )
    if "peers" in results:
        rows += sidebyside.targets(results["peers"])
    if "heavy" in results:
        rows += heavy.targets(results["heavy"])
    if "tokens" in results:
        rows += tokens.targets(results["tokens"])
    if "sessions" in results:
        rows += sessions.targets(results["sessions"])
    if rows:
        width = max(len(r[0]) for r in rows)
        print("\ntargets")
        for what, got, want, met in rows:
            print(f"  {'met ' if met else 'MISS'}  {what:<{width}}  {got:>10}  (target {want})")
    results["targets"] = [{"what": w, "measured": g, "target": t, "met": m} for w, g, t, m in rows]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
