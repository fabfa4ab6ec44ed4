"""wrk as the load generator for throughput: C, so it is never what limits a run."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _lua(body: bytes, headers: dict[str, str]) -> str:
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = [==[{body.decode()}]==]",
        'wrk.headers["Content-Type"] = "application/json"',
    ]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    return "\n".join(lines) + "\n"


def _ms(text: str) -> float:
    number, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def run(
    url: str,
    body: bytes,
    *,
    connections: int,
    seconds: float,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """requests/s, latency p50/p99 in ms, and how many answers were not 2xx."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "post.lua"
        script.write_text(_lua(body, headers or {}))
        ran = subprocess.run(
            [
                "wrk",
                "-t1",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",  # wrk takes whole seconds only
                "--latency",
                "--timeout",
                "30s",
                "-s",
                str(script),
                url,
            ],
            capture_output=True,
            text=True,
        )
    if ran.returncode != 0:
        raise RuntimeError(f"wrk against {url} failed: {ran.stderr.strip() or ran.stdout.strip()}")
    out = ran.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    p50 = re.search(r"\s50%\s+([\d.]+\w+)", out)
    p99 = re.search(r"\s99%\s+([\d.]+\w+)", out)
    return {
        "rps": rps,
        "requests": total,
        "non_2xx": int(bad.group(1)) if bad else 0,
        "socket_errors": sum(int(g) for g in errors.groups()) if errors else 0,
        "p50_ms": _ms(p50.group(1)) if p50 else None,
        "p99_ms": _ms(p99.group(1)) if p99 else None,
    }
