"""One request too large to work on beside the event loop, and everyone else's wait meanwhile.

A probe asks /healthz over and over on one connection while another client sends a body of MB
megabytes: a Responses history of many small items, the shape that holds a JSON reader (and the
GIL) longest. The figure is the probe's longest wait while that body is read and decided, with
the body handed to a worker process (the default --offload-bytes) and with it read in a thread
(--offload-bytes 0), against the probe's p99 wait when nothing else happens. Both proxies forward
the body to the bench's upstream, which answers at once.
"""

from __future__ import annotations

import threading
import time
from statistics import quantiles
from typing import Any

import httpx
import orjson

from bench.procs import proxy, upstream

SIZES_MB = (8, 64)
RUNS = 3  # bodies per size and path; the median of their longest waits is kept


def body(megabytes: int) -> bytes:
    items = megabytes * 1024 * 1024 // 60
    history = [{"role": "user", "content": "the task"}]
    history += [
        {"type": "function_call_output", "call_id": f"c{i}", "output": "o" * 10}
        for i in range(items)
    ]
    return orjson.dumps({"model": "bench", "input": history, "tools": []})


class Probe:
    """Asks /healthz back to back from a thread; keeps when each answer came and how long it
    took."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.waits: list[tuple[float, float]] = []  # (answered at, seconds waited)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self.stop.is_set():
                started = time.perf_counter()
                client.get(self.root + "/healthz")
                now = time.perf_counter()
                self.waits.append((now, now - started))

    def longest(self, start: float, end: float) -> float:
        return max((w for at, w in self.waits if start <= at <= end + 1), default=0.0)


def _measure(url: str, sizes: tuple[int, ...]) -> dict[str, Any]:
    root = url.removesuffix("/v1")
    probe = Probe(root)
    probe.thread.start()
    time.sleep(1)  # the probe's own pace, with nothing else going on
    quiet = [w for _, w in probe.waits]
    out: dict[str, Any] = {"baseline_p99_ms": round(quantiles(quiet, n=100)[98] * 1000, 2)}
    with httpx.Client(timeout=300) as client:
        for megabytes in sizes:
            raw = body(megabytes)
            longest = []
            for _ in range(RUNS):
                start = time.perf_counter()
                answer = client.post(
                    url + "/responses",
                    content=raw,
                    headers={"content-type": "application/json", "x-session-affinity": "heavy"},
                )
                end = time.perf_counter()
                assert answer.status_code == 200, answer.text[:300]
                longest.append(probe.longest(start, end))
            longest.sort()
            out[f"{megabytes}mb"] = {
                "longest_wait_ms": round(longest[len(longest) // 2] * 1000, 1),
                "request_s": round(end - start, 2),
            }
    probe.stop.set()
    probe.thread.join()
    return out


def suite(sizes: tuple[int, ...] = SIZES_MB) -> dict[str, Any]:
    limit = str(max(sizes) * 2 * 1024 * 1024)
    results: dict[str, Any] = {}
    with upstream() as (up, _):
        for name, offload in (("worker", None), ("thread", "0")):
            flags = ["--upstream", up, "--max-body-bytes", limit]
            if offload is not None:
                flags += ["--offload-bytes", offload]
            with proxy(*flags) as (url, _):
                results[name] = _measure(url, sizes)
    return results


def table(r: dict[str, Any]) -> str:
    lines = [
        "probe's longest wait while one large body is read and decided (ms; p99 when idle: "
        f"worker {r['worker']['baseline_p99_ms']}, thread {r['thread']['baseline_p99_ms']})",
        f"{'body':>8} {'worker process':>15} {'thread':>10} {'ratio':>7}",
    ]
    for key in r["worker"]:
        if not key.endswith("mb"):
            continue
        worker = r["worker"][key]["longest_wait_ms"]
        thread = r["thread"][key]["longest_wait_ms"]
        ratio = thread / worker if worker else float("inf")
        lines.append(f"{key:>8} {worker:>15.1f} {thread:>10.1f} {ratio:>6.1f}x")
    return "\n".join(lines)


def targets(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """Handed to a worker, the largest body holds the others up no longer than a few of the
    probe's idle p99 waits (the body still has to be received, and handed over)."""
    largest = f"{max(SIZES_MB)}mb"
    worker = r["worker"][largest]["longest_wait_ms"]
    thread = r["thread"][largest]["longest_wait_ms"]
    return [
        (
            f"longest /healthz wait while a {largest.removesuffix('mb')} MB body is decided, "
            "worker process vs thread",
            f"{thread / worker if worker else float('inf'):.1f}x",
            ">= 3x",
            worker * 3 <= thread,
        )
    ]
