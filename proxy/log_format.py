"""The proxy's own log (a harness log is another thing: formats/harness_logs/): text or JSON
lines (--log-format), and the one line each request gets.

The request line carries only session, lane, source, turn, status and duration (and the API):
never headers or bodies, so never credentials.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

REQUESTS = logging.getLogger("proxy.requests")
FIELDS = ("api", "session", "lane", "source", "turn", "status", "ms")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            if hasattr(record, name):
                line[name] = getattr(record, name)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)


def configure(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        formatter: logging.Formatter = JsonFormatter()
        formatter.converter = time.gmtime
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def request_line(
    api: str, session: str, lane: str, source: str, turn: str, status: int, ms: float
) -> None:
    if not REQUESTS.isEnabledFor(logging.INFO):
        return
    fields = {
        "api": api,
        "session": session,
        "lane": lane,
        "source": source,
        "turn": turn,
        "status": status,
        "ms": round(ms, 1),
    }
    REQUESTS.info(
        "api=%s session=%s lane=%s source=%s turn=%s status=%d ms=%.1f",
        api, session, lane, source, turn, status, ms,
        extra=fields,
    )  # fmt: skip
