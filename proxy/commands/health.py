"""`replay-proxy health`: exit 0 when the proxy on this host answers /healthz (a container's
HEALTHCHECK). Imports nothing beyond the standard library: it runs every few seconds."""

from __future__ import annotations

import os
import sys
import urllib.request


def healthcheck(url: str | None, port: int | None = None) -> int:
    url = url or f"http://127.0.0.1:{port or os.environ.get('REPLAY_PROXY_PORT', '8080')}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            healthy = answer.status == 200
    except (OSError, ValueError) as exc:
        print(f"replay-proxy: {url}: {exc}", file=sys.stderr)
        return 1
    return 0 if healthy else 1
