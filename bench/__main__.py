"""python -m bench [stores] [--redis URL] [--out FILE]: run suites, print tables, write JSON."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from bench import stores


def table(title: str, rows: dict[str, dict[str, Any]], columns: list[str]) -> str:
    lines = [title, "  " + " | ".join(["case", *columns])]
    for name, row in rows.items():
        lines.append("  " + " | ".join([name, *(str(row.get(c)) for c in columns)]))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("suites", nargs="*", default=["stores"], choices=["stores"])
    parser.add_argument("--redis", metavar="URL", help="a Redis server for the redis:// store")
    parser.add_argument(
        "--out", type=Path, default=Path("bench/results") / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    )
    args = parser.parse_args()
    results: dict[str, Any] = {}
    if "stores" in args.suites:
        results["stores"] = stores.suite(args.redis)
        print(
            table(
                "per-request overhead by store (scripted turns, 1 worker, concurrency 8)",
                results["stores"],
                [
                    "rps",
                    "rps_vs_memory",
                    "cpu_ms_per_request",
                    "cpu_vs_memory",
                    "p50_ms",
                    "p99_ms",
                    "errors",
                ],
            )
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
