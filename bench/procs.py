"""Processes under measurement: start the proxy, read its CPU time from /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children (workers)."""
    total = 0.0
    for p in [pid, *_children(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = (task / "children").read_text().split()
        except FileNotFoundError:
            continue
        for kid in kids:
            found.append(int(kid))
            found.extend(_children(int(kid)))
    return found


@contextmanager
def proxy(*args: str) -> Iterator[tuple[str, int]]:
    """`replay-proxy serve --port 0 ARGS` at log level warning; yields (base URL, pid)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", "--log-level", "warning", *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if "listening on " not in line:
            raise RuntimeError(f"the proxy did not start: {line!r}")
        yield line.rsplit("listening on ", 1)[1].strip(), process.pid
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)
