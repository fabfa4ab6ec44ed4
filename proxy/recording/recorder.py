"""--record-dir: every exchange, scripted or forwarded, in every lane, appended to <session>.jsonl.

One JSON line per exchange, made and written when the exchange completes, in one writer thread
(lines never interleave, and the event loop never waits on the disk or on serialising). A crash
loses at most the exchange in flight; a half-written last line is skipped with a warning when the
recording is loaded.
Credentials are never written: no request headers are recorded, and every secret the proxy knows
(the upstream key, the admin token, the client's own key) is replaced wherever it would appear.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from proxy.names import file_in

FORMAT_VERSION = 1
REDACTED = "[redacted]"


@dataclass(slots=True)
class Exchange:
    session: str
    lane: str  # a Lane (proxy.replay.conversation)
    api: str  # chat | other
    method: str
    path: str
    source: str  # scripted | upstream | strict | error
    request: Any  # the body as the client sent it
    forwarded: Any = None  # the body sent upstream, when it differed (user messages spliced in)
    status: int = 0
    stream: bool = False
    content_type: str | None = None
    response: Any = None  # the JSON body of a non-streamed answer
    events: list[str] | None = None  # the raw SSE events of a streamed answer
    message: dict[str, Any] | None = None  # the assistant message the answer carried
    finish_reason: str | None = None
    turn: str | None = None  # "k/N" for scripted answers
    started: float = 0.0  # epoch seconds
    ttfb_ms: float | None = None
    duration_ms: float | None = None
    error: str | None = None  # e.g. the stream broke off, or the client left
    preset: str | None = None  # the harness recognised (proxy.replay.presets), when presets are on
    upstream: str | None = None  # where it went live, when --upstream depends on the session
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self, secrets: Iterable[str]) -> bytes:
        data = {"type": "exchange", "v": FORMAT_VERSION, **asdict(self)}
        if not data["extra"]:
            del data["extra"]
        return redact(orjson.dumps(data), secrets) + b"\n"


def redact(data: bytes, secrets: Iterable[str]) -> bytes:
    for secret in secrets:
        if secret and len(secret) >= 4:
            data = data.replace(secret.encode(), REDACTED.encode())
    return data


class Recorder:
    def __init__(self, folder: Path, secrets: Iterable[str] = ()) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.secrets = tuple(s for s in secrets if s)
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recorder")

    def path_for(self, session: str) -> Path:
        return file_in(self.folder, session, ".jsonl")

    async def write(self, exchange: Exchange, secrets: Iterable[str] = ()) -> None:
        """The line is made in the writer thread too: a large answer takes long to serialise."""
        path = self.path_for(exchange.session)
        known = (*self.secrets, *secrets)
        await asyncio.get_running_loop().run_in_executor(
            self._writer, _append, path, exchange, known
        )

    def close(self) -> None:
        self._writer.shutdown(wait=True)


def _append(path: Path, exchange: Exchange, secrets: tuple[str, ...]) -> None:
    line = exchange.line(secrets)
    with path.open("ab") as f:
        f.write(line)
