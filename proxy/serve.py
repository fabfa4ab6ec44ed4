"""`replay-proxy serve`: flags and environment -> Settings -> a bound socket -> uvicorn.

Every error in flags, the environment or trajectory files is reported before the server binds
(exit 2 for flags and the environment, 1 for a bad file). The socket is bound here, so a port in
use is reported at once and the port chosen for --port 0 is printed before anything is served.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import os
import secrets
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from pydantic import SecretStr, ValidationError

from proxy import admin_token
from proxy.app import INSTANCE, WORKER_SETTINGS, configure_logging, create_app, settle
from proxy.config import ENV_PREFIX, Settings, unknown_variables
from proxy.exits import EXIT_BAD_FILE, EXIT_USAGE
from proxy.names import is_valid_name
from proxy.sessions.library import Library, LibraryError
from proxy.store import open_store
from proxy.upstream import display
from proxy.upstream.pool import forward_proxy
from proxy.upstream.template import fields


def _settings(flags: dict[str, Any]) -> Settings:
    if "trajectory" in flags:
        flags["trajectory"] = tuple(flags["trajectory"])
    for name in (
        "session_header",
        "subagent_header",
        "mask",
        "mask_file",
        "allowed_host",
        "upstream_header",
    ):
        if name in flags:
            flags[name] = tuple(flags[name])
    return Settings(**flags)


class _Refused(Exception):
    """Why `serve` stops before it serves anything: lines for stderr, and the exit code."""

    def __init__(self, code: int, *lines: str) -> None:
        super().__init__(*lines)
        self.code, self.lines = code, lines


def serve(flags: dict[str, Any]) -> int:
    """Every problem in the flags, the environment, the files, the store or the port is said
    before the server binds, in that order; then uvicorn serves until it stops."""
    try:
        settings = _read(flags)
        configure_logging(settings)
        _warn_of_unknown_variables()
        _prepare(settings)
        library = _library(settings)
        unnamed = _unnamed_for_the_upstream(settings, library)
        if unnamed is not None:
            raise _Refused(EXIT_USAGE, unnamed)
        _reach_store(settings)
        sock, port = _bind(settings)
    except _Refused as refused:
        for line in refused.lines:
            print(f"replay-proxy: {line}", file=sys.stderr)
        return refused.code
    try:
        with _admin_token(settings, port) as (settings, token_file):
            _started(settings, sock, library, port, token_file)
    except _Unwritable as exc:
        sock.close()
        print(f"replay-proxy: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _read(flags: dict[str, Any]) -> Settings:
    """The settings, from the flags and the environment; each problem named by its flag, or by
    its variable when it came from the environment."""
    try:
        return _settings(flags)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            if not field:
                flag = ""
            elif field in flags:
                flag = f"--{field.replace('_', '-')}: "
            else:  # not given as a flag: it came from the environment
                flag = f"{ENV_PREFIX}{field.upper()}: "
            lines.append(f"{flag}{error['msg'].removeprefix('Value error, ')}")
        raise _Refused(EXIT_USAGE, *lines) from None


def _warn_of_unknown_variables() -> None:
    for variable, meant in unknown_variables(os.environ):
        also = f" (did you mean {meant}?)" if meant else ""
        print(f"replay-proxy: warning: {variable} is not a setting, ignored{also}", file=sys.stderr)


def _prepare(settings: Settings) -> None:
    """The folders it writes to, made; the forward proxy of the environment, read once."""
    for flag, folder in (("--record-dir", settings.record_dir), ("--dump-dir", settings.dump_dir)):
        if folder is None:
            continue
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _Refused(
                EXIT_USAGE, f"{flag} {folder}: cannot create it: {exc.strerror}"
            ) from None
    if settings.upstream:
        try:
            forward_proxy(settings.upstream)  # read from the environment once, here first
        except ValueError as exc:
            raise _Refused(EXIT_USAGE, str(exc)) from None


def _library(settings: Settings) -> Library:
    try:
        return Library.load(
            settings.trajectory,
            settings.trajectory_dir,
            cache_bytes=settings.trajectory_cache_bytes,
        )
    except LibraryError as exc:
        raise _Refused(EXIT_BAD_FILE, *(str(problem) for problem in exc.errors)) from None


def _reach_store(settings: Settings) -> None:
    try:
        asyncio.run(_check_store(settings.store))
    except Exception as exc:
        raise _Refused(EXIT_USAGE, f"--store {settings.store}: {exc}") from None


def _bind(settings: Settings) -> tuple[socket.socket, int]:
    """The listening socket (workers get it too), and its port; never the upstream's own."""
    try:
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # accepted connections inherit it (workers too, which get the socket as a bare fd):
        # without it Nagle plus delayed ACKs cost 40 ms per answer on a keep-alive connection
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((settings.host, settings.port))
        sock.listen(2048)  # connections queue from now on, before the workers accept them
    except OSError as exc:
        hint = ""
        if exc.errno == errno.EADDRINUSE:
            hint = (
                "; another program listens there: choose a free port with --port N (or "
                "REPLAY_PROXY_PORT), or --port 0 for any"
            )
        raise _Refused(
            EXIT_USAGE, f"cannot bind {settings.host}:{settings.port}: {exc.strerror}{hint}"
        ) from None
    port = sock.getsockname()[1]
    if settings.upstream and points_at(settings.upstream, settings.host, port):
        sock.close()
        raise _Refused(
            EXIT_USAGE,
            f"--upstream {display(settings.upstream)} is this proxy's own address "
            f"({settings.host}:{port}): every request it forwards would come back to it; point "
            "--upstream at the real model's API",
        )
    return sock, port


def _started(
    settings: Settings, sock: socket.socket, library: Library, port: int, token_file: Path | None
) -> None:
    """The start lines, then uvicorn until it stops."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    upstream = display(settings.upstream) if settings.upstream else "(none)"
    workers = f", {settings.workers} workers on {settings.store}" if settings.workers > 1 else ""
    print(
        f"replay-proxy: {len(library)} trajectories, upstream {upstream}{workers}; "
        f"listening on http://{host}:{port}/v1",
        flush=True,
    )
    print(_described(settings, f"http://{host}:{port}", token_file), flush=True)
    for warning in _cannot_work(settings, len(library)):
        print(f"replay-proxy: warning: {warning}", file=sys.stderr, flush=True)
    common: dict[str, Any] = {
        "log_config": None,
        "log_level": settings.log_level.value,
        "access_log": False,
        "lifespan": "on",
        "timeout_keep_alive": settings.keep_alive_timeout,
        "timeout_graceful_shutdown": settings.shutdown_timeout,
        "proxy_headers": False,  # nothing reads the client address; one less layer per request
        "server_header": False,  # a forwarded answer keeps the upstream's, not a second one
        **settings.socket_server(),
    }
    _run(settings, sock, library, common)


def _run(settings: Settings, sock: socket.socket, library: Library, common: dict[str, Any]) -> None:
    """uvicorn on the bound socket: in this process, or in --workers processes sharing it."""
    if settings.workers > 1:
        os.environ[WORKER_SETTINGS] = settings.worker_env()
        os.environ[INSTANCE] = secrets.token_hex(8)  # one Via mark for all the workers
        with _shared_metrics():
            # the workers inherit the socket bound above (uvicorn's --fd), so the port printed is
            # theirs and a port in use was reported before any worker started
            uvicorn.run(
                "proxy.app:factory",
                factory=True,
                fd=sock.fileno(),
                workers=settings.workers,
                **common,
            )
        return
    app = create_app(settings, library=library)
    settle()
    uvicorn.Server(uvicorn.Config(app, **common)).run(sockets=[sock])  # run() sets up uvloop


class _Unwritable(Exception):
    """The admin token made at start cannot be written where it should go."""


@contextlib.contextmanager
def _admin_token(settings: Settings, port: int) -> Iterator[tuple[Settings, Path | None]]:
    """No --admin-token and no --insecure-admin: a token made now, written where only this user
    can read it (the start line says where), and taken away when the proxy stops, however it
    stops: from the moment it is written, so that a Ctrl-C at any point of the start leaves no
    file behind; on SIGTERM too (uvicorn re-raises the SIGTERM it caught once it has shut down,
    and its default action would end the process before any `finally`: the file goes first,
    then the signal has its way)."""
    if settings.admin_token is not None or settings.insecure_admin:
        yield settings, None
        return
    token = admin_token.make()
    path = settings.admin_token_file or admin_token.default_file(port)

    def terminated(signum: int, frame: object) -> None:
        admin_token.remove_file(path, token)
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        try:
            admin_token.write_file(path, token)
        except OSError as exc:
            raise _Unwritable(
                f"--admin-token-file {path}: cannot write the admin token made at start: "
                f"{exc.strerror or exc}; choose a file with --admin-token-file, give a token "
                "with --admin-token, or serve the admin API without one with --insecure-admin"
            ) from None
        yield settings.model_copy(update={"admin_token": SecretStr(token)}), path
    finally:
        admin_token.remove_file(path, token)
        signal.signal(signal.SIGTERM, previous)


def _unnamed_for_the_upstream(settings: Settings, library: Library) -> str | None:
    """With {trajectory} in --upstream or --upstream-header, every loaded trajectory's name must
    be one the template takes; said at start rather than as a 400 on each live call."""
    templates = [settings.upstream or "", *settings.upstream_header]
    if not any("trajectory" in fields(t) for t in templates):
        return None
    for trajectory in library.all():
        if not is_valid_name(trajectory.name):
            return (
                f"{trajectory.filename}: its name {trajectory.name!r} fills {{trajectory}} in the "
                "upstream, and may hold only letters, digits and . _ : -; rename the file"
            )
    return None


def points_at(upstream: str, host: str, port: int) -> bool:
    """The upstream URL names the address and port this proxy listens on. Names other than
    localhost are not looked up: the Via mark refuses the first request that comes back."""
    url = urlsplit(upstream)
    try:
        target = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        return False
    name = (url.hostname or "").lower()
    if target != port or not name:
        return False
    targets = _addresses(name)
    if host in ("0.0.0.0", "::"):  # every address of this machine
        return any(a.is_unspecified or _is_local(str(a)) for a in targets)
    return bool(targets & _addresses(host.lower()))


def _addresses(name: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """An IP address as itself, localhost as loopback's; other names are not looked up."""
    if name == "localhost":
        return {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    try:
        return {ipaddress.ip_address(name)}
    except ValueError:
        return set()


def _is_local(address: str) -> bool:
    """An address of this machine: one a socket can be bound to."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


def _described(settings: Settings, root: str, token_file: Path | None) -> str:
    """The start line's second half: how it replays, where it writes, and where to look."""
    parts = [f"mode {settings.mode.value}"]
    if settings.replay_turns is not None:
        parts.append(f"{settings.replay_turns} turns, then live")
    if settings.fault:
        parts.append(f"faults {', '.join(settings.fault)}")
    if settings.record_dir is not None:
        parts.append(f"recording to {settings.record_dir}")
    if settings.dump_dir is not None:
        parts.append(f"dumps to {settings.dump_dir}")
    parts.append(f"status page {root}/replay/ui")
    if token_file is not None:
        parts.append(f"admin token in {token_file}")
    elif settings.admin_token is None:
        parts.append("admin API without a token (--insecure-admin)")
    return "replay-proxy: " + "; ".join(parts)


def _cannot_work(settings: Settings, trajectories: int) -> list[str]:
    """Configurations that serve, but in which every request fails until the admin API loads a
    script: said at once rather than at the first request."""
    nothing = trajectories == 0 and settings.trajectory_dir is None
    if nothing and settings.mode.value == "strict":
        return [
            "--mode strict with no --trajectory or --trajectory-dir: every request is refused "
            "until a script is PUT through the admin API (strict mode never goes live)"
        ]
    if nothing and not settings.upstream:
        return [
            "no --trajectory, no --trajectory-dir and no --upstream: nothing to replay and nowhere "
            "to forward; every request gets 503 until a script is PUT through the admin API"
        ]
    return []


@contextlib.contextmanager
def _shared_metrics() -> Iterator[None]:
    """Workers write their metrics to files in one folder (prometheus_client's multiprocess
    mode), so a scrape of any worker reports the sum of all; the workers inherit the variable."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        yield  # the operator's own folder, kept
        return
    with tempfile.TemporaryDirectory(prefix="replay-proxy-metrics-") as folder:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder
        try:
            yield
        finally:
            del os.environ["PROMETHEUS_MULTIPROC_DIR"]


async def _check_store(url: str) -> None:
    store = open_store(url)
    try:
        await store.check()
    finally:
        await store.close()
