"""--record-dir: every exchange, scripted or forwarded, in every lane, appended to <session>.jsonl.

One JSON line per exchange, made and written when the exchange completes, in one writer thread
(lines never interleave, and the event loop never waits on the disk or on serialising). A crash
loses at most the exchange in flight; a half-written last line is skipped with a warning when the
recording is loaded.
One file per run of a session, as a cassette holds one: a session whose file holds an earlier run
(of another proxy, or of this one before the agent started over: proxy.formats.recording.Run)
goes on in <session>.2.jsonl, then .3, said in the log; each line names its run. The workers of
one `serve` write the same run's file, deciding under a lock on the folder.
Credentials are never written: no request headers are recorded, and every secret the proxy knows
(the upstream key, the admin token, the client's own key) is replaced wherever it would appear.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import secrets as random
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

import orjson

from proxy.apis import BY_NAME, Api
from proxy.formats.recording import Run
from proxy.names import file_in

FORMAT_VERSION = 1
REDACTED = "[redacted]"
# the variable `serve` sets to one id for all its workers (proxy.app.INSTANCE): their recorders
# write one run to one file
INSTANCE_VARIABLE = "_REPLAY_PROXY_INSTANCE"
SESSIONS_KEPT = 10_000  # sessions whose run this process keeps in mind; others are read again

log = logging.getLogger("proxy.recording")


class RawJson(bytes):
    """A JSON body kept as the bytes it came in, for a line: written into it as it is, without
    reading it (in the writer thread, made one line first when a client sent it indented)."""


def _raw_json(value: Any) -> Any:
    """orjson's hook for what it cannot write itself: a RawJson, as the JSON it holds."""
    if isinstance(value, RawJson):
        if value.find(b"\n") != -1 or value.find(b"\r") != -1:  # one exchange, one line
            return orjson.Fragment(orjson.dumps(orjson.loads(memoryview(value))))
        return orjson.Fragment(bytes(value))
    raise TypeError(f"{type(value).__name__} is not JSON")


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
    run: str | None = None  # its run of the session, one file per run (the recorder sets it)
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self, secrets: Iterable[str]) -> bytes:
        # the fields as they are: asdict would deep-copy every body only to serialise it once
        data = {"type": "exchange", "v": FORMAT_VERSION}
        data.update((f.name, getattr(self, f.name)) for f in fields(self))
        if not data["extra"]:
            del data["extra"]
        return redact(orjson.dumps(data, default=_raw_json), secrets) + b"\n"


def redact(data: bytes, secrets: Iterable[str]) -> bytes:
    for secret in secrets:
        if secret and len(secret) >= 4:
            data = data.replace(secret.encode(), REDACTED.encode())
    return data


@dataclass(slots=True)
class _RunFile:
    """The file a run of a session is written to, and what this process knows of the run."""

    number: int  # 1: <session>.jsonl, N: <session>.N.jsonl
    path: Path
    run: Run
    session: str | None = None  # whose lines it holds, as its first line says
    read: int = 0  # bytes of the file whose lines `run` has taken in


class Recorder:
    def __init__(
        self,
        folder: Path,
        secrets: Iterable[str] = (),
        *,
        instance: str | None = None,
        apis: Mapping[str, Api] = BY_NAME,
    ) -> None:
        """`instance`: the `serve` this recorder is part of (its workers share it), by default
        the one `serve` put in the environment for its workers, else a new one. `apis`: the APIs
        served, by name (whose histories tell where a run starts over)."""
        folder.mkdir(parents=True, exist_ok=True)
        self.apis = apis
        self.folder = folder
        self.secrets = tuple(s for s in secrets if s)
        serve = instance or os.environ.get(INSTANCE_VARIABLE) or random.token_hex(8)
        self._serve = f"{serve}."  # every run id this serve makes starts with it
        self._files: OrderedDict[str, _RunFile] = OrderedDict()  # writer thread only
        # each file name checked once (a checked name is one plain name in the folder; a link
        # planted there later is refused when the file is opened: _open)
        self._paths: dict[tuple[str, int], Path] = {}
        self._lock = os.open(folder, os.O_RDONLY)  # flock'ed while a run's file is chosen
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recorder")

    def path_for(self, session: str, number: int = 1) -> Path:
        """<session>.jsonl, or <session>.N.jsonl for the session's N-th run in the folder."""
        path = self._paths.get((session, number))
        if path is None:
            first = file_in(self.folder, session, ".jsonl")  # the session id checked once
            path = first if number == 1 else first.with_name(f"{session}.{number}.jsonl")
            if len(self._paths) >= SESSIONS_KEPT:
                self._paths.clear()
            self._paths[(session, number)] = path
        return path

    async def write(self, exchange: Exchange, secrets: Iterable[str] = ()) -> None:
        """The line is made in the writer thread too: a large answer takes long to serialise."""
        self.path_for(exchange.session)  # a session id that is no file name: refused here
        known = (*self.secrets, *secrets)
        await asyncio.get_running_loop().run_in_executor(
            self._writer, self._append, exchange, known
        )

    async def newest(self, session: str) -> Path | None:
        """The file of the session's newest run (None: it has none), asked in the writer
        thread: every line this process wrote before is in it."""
        self.path_for(session)  # a session id that is no file name: refused here
        return await asyncio.get_running_loop().run_in_executor(self._writer, self._newest, session)

    def _newest(self, session: str) -> Path | None:
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # not while another worker begins a run
        try:
            _, newest = self._current(session)
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
        return self.path_for(session, newest) if newest else None

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        os.close(self._lock)

    def _append(self, exchange: Exchange, secrets: tuple[str, ...]) -> None:
        session, seen = exchange.session, _seen(exchange)
        fcntl.flock(self._lock, fcntl.LOCK_EX)  # other workers of this serve, other proxies
        try:
            current, newest = self._current(session)
            if current is None:
                current = self._start(session, newest)
            elif (why := current.run.begins_another(seen)) is not None:
                current = self._start(session, newest, (why, current.path))
            exchange.run = current.run.id
            line = exchange.line(secrets)
            with _open(current.path, os.O_WRONLY | os.O_APPEND, "ab") as f:
                f.write(line)
                current.read = f.tell()  # under the lock: no other line came in between
            current.run.add(seen)
        finally:
            fcntl.flock(self._lock, fcntl.LOCK_UN)

    def _current(self, session: str) -> tuple[_RunFile | None, int]:
        """The file of the run this serve records for the session, up to date with what other
        workers wrote (None when it has none: no file, or only earlier runs'), and the number
        of the session's newest file (0: none)."""
        known = self._files.get(session)
        if known is not None and not known.path.exists():  # taken away: begin again
            del self._files[session]
            known = None
        newest = known.number if known is not None else 0
        while self.path_for(session, newest + 1).exists():  # another worker may have begun one
            newest += 1
        if known is not None and known.number == newest:
            self._files.move_to_end(session)
            _catch_up(known)
            return known, newest
        if newest == 0:
            return None, 0
        found = _RunFile(newest, self.path_for(session, newest), Run(apis=self.apis))
        _catch_up(found)
        ours = found.run.id is not None and found.run.id.startswith(self._serve)
        if not ours or found.session != session:
            return None, newest  # an earlier run's (another proxy's), or another session's
        self._keep(session, found)
        return found, newest

    def _start(
        self, session: str, newest: int, because: tuple[str, Path] | None = None
    ) -> _RunFile:
        """A file for a new run of the session, numbered after its newest; `because`: why the
        run it follows ended, and that run's file."""
        number = newest + 1
        while True:
            path = self.path_for(session, number)
            try:
                path.open("xb").close()
                break
            except FileExistsError:  # a file of another session whose id ends in .N
                number += 1
        started = _RunFile(
            number, path, Run(id=f"{self._serve}{random.token_hex(6)}", apis=self.apis), session
        )
        self._keep(session, started)
        if because is not None:
            log.info(
                "session %s begins another run: %s; it is recorded to %s (%s keeps the one before)",
                session, because[0], path, because[1],
            )  # fmt: skip
        elif number > 1:
            log.info(
                "session %s is recorded to %s: %s holds an earlier run of it",
                session, path, self.path_for(session, newest),
            )  # fmt: skip
        return started

    def _keep(self, session: str, run: _RunFile) -> None:
        self._files[session] = run
        self._files.move_to_end(session)
        if len(self._files) > SESSIONS_KEPT:  # a session forgotten here is read again if it comes
            self._files.popitem(last=False)


def _open(path: Path, flags: int, mode: str) -> IO[bytes]:
    """A run's file, never through a link (one put in the folder after its name was checked)."""
    return os.fdopen(os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC), mode)


def _seen(exchange: Exchange) -> dict[str, Any]:
    """The exchange as proxy.formats.recording.Run reads a recorded line."""
    return {
        "session": exchange.session,
        "lane": exchange.lane,
        "api": exchange.api,
        "status": exchange.status,
        "error": exchange.error,
        "request": _raw_json(r) if isinstance(r := exchange.request, RawJson) else r,
        "message": exchange.message,
    }


def _catch_up(file: _RunFile) -> None:
    """Take in the lines other workers appended since this process last read the file (a line
    cut off mid-write is left for the next time). The first line names the run and session."""
    if file.read and file.path.stat().st_size == file.read:
        return  # nothing new: what one process alone writes
    with _open(file.path, os.O_RDONLY, "rb") as f:
        f.seek(file.read)
        data = f.read()
    end = data.rfind(b"\n") + 1
    first = file.read == 0
    for raw in data[:end].splitlines():
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue  # not a line of the recorder's: the loader says so
        if not isinstance(line, dict):
            continue
        if first:
            run, session = line.get("run"), line.get("session")
            file.run.id = run if isinstance(run, str) else None
            file.session = session if isinstance(session, str) else None
            first = False
        file.run.add(line)
    file.read += end
