"""replay-proxy serve | check: flags and env -> Settings -> server.

Every error in flags or trajectory files is reported before the server binds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket
import sys
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from pydantic import ValidationError

from proxy.config import DEFAULT_SESSION_HEADERS, Settings
from proxy.errors import LoadError
from proxy.formats import load_file
from proxy.recording.diff import diff
from proxy.replay.engine import AfterScript, DivergencePolicy, Mode, ObservationPolicy
from proxy.replay.normalize import compile_masks
from proxy.replay.trajectory import Trajectory
from proxy.sessions.library import Library, LibraryError
from proxy.store import open_store
from proxy.upstream import display
from proxy.upstream.pool import forward_proxy

EXIT_BAD_FILE = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replay-proxy",
        description="An OpenAI-compatible proxy that replays saved agent trajectories.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the proxy",
        argument_default=argparse.SUPPRESS,  # unset flags fall back to REPLAY_PROXY_* and defaults
        description="Each flag is also settable as REPLAY_PROXY_<FLAG_IN_CAPS>; lists comma-separated.",
    )
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind, 0 for any free one (default 8080)")
    serve.add_argument("--upstream", metavar="URL", help="the real LLM's base URL, including /v1")
    serve.add_argument(
        "--upstream-api-key",
        metavar="KEY",
        help="sent upstream instead of the client's credentials (default: pass the client's on)",
    )
    serve.add_argument(
        "--trajectory", metavar="FILE", action="append", type=Path, help="a trajectory (repeatable)"
    )
    serve.add_argument(
        "--trajectory-dir", metavar="DIR", type=Path, help="NAME.json / NAME.jsonl trajectories"
    )
    serve.add_argument(
        "--session-header",
        metavar="NAME",
        action="append",
        help=f"session header, first present wins (repeatable; default {', '.join(DEFAULT_SESSION_HEADERS)})",
    )
    serve.add_argument(
        "--subagent-header",
        metavar="NAME",
        help="marks subagent calls (default x-parent-session-id)",
    )
    serve.add_argument(
        "--bind-on-task",
        action="store_true",
        help="bind a session only to a trajectory with its task, never to an unclaimed one",
    )
    serve.add_argument(
        "--on-divergence",
        choices=[p.value for p in DivergencePolicy],
        help="when the history disagrees with the script: answer an error, or go live (default error)",
    )
    serve.add_argument(
        "--mode",
        choices=[m.value for m in Mode],
        help="resume: replay, then go live (default); strict: replay only, compare every request",
    )
    serve.add_argument(
        "--mask",
        metavar="REGEX",
        action="append",
        help="text that may differ between runs (dates, paths); masked before comparing (repeatable)",
    )
    serve.add_argument(
        "--on-observation-divergence",
        choices=[p.value for p in ObservationPolicy],
        help="when a tool result differs from the recorded one (default warn)",
    )
    serve.add_argument(
        "--after-script",
        choices=[a.value for a in AfterScript],
        help="when the script is used up: go live (default) or stop with a final text turn",
    )
    serve.add_argument("--record-dir", metavar="DIR", type=Path, help="record every exchange here")
    serve.add_argument("--dump-dir", metavar="DIR", type=Path, help="dump live completions here")
    serve.add_argument(
        "--store",
        metavar="URL",
        help="session state: memory:// (default), sqlite:///state.db, redis://host:6379/0",
    )
    serve.add_argument("--workers", type=int, help="worker processes (needs sqlite or redis)")
    serve.add_argument("--admin-token", metavar="TOKEN", help="Bearer token for /replay/*")
    serve.add_argument(
        "--insecure-admin",
        action="store_true",
        help="serve the admin API without a token on a non-loopback address",
    )
    limits = serve.add_argument_group("limits and timeouts")
    limits.add_argument(
        "--max-body-bytes",
        type=int,
        metavar="N",
        help="largest request body, and largest answer copied for --record-dir/--dump-dir "
        "(default 67108864: 64 MiB)",
    )
    limits.add_argument(
        "--connect-timeout",
        type=float,
        metavar="S",
        help="seconds to connect to the upstream (default 10)",
    )
    limits.add_argument(
        "--read-timeout",
        type=float,
        metavar="S",
        help="seconds the upstream may stay silent, before or within its answer (default 600)",
    )
    limits.add_argument(
        "--total-timeout",
        type=float,
        metavar="S",
        help="seconds for a whole upstream answer, stream included (default: no limit)",
    )
    limits.add_argument(
        "--keep-alive-timeout",
        type=float,
        metavar="S",
        help="seconds an idle client connection is kept open (default 120)",
    )
    limits.add_argument(
        "--shutdown-timeout",
        type=float,
        metavar="S",
        help="on SIGTERM, seconds the answers in flight may take to finish (default 30)",
    )
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--log-format", choices=["text", "json"], help="one JSON object per line with json"
    )

    check = commands.add_parser("check", help="describe what trajectory files will replay")
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")
    check.add_argument("--json", action="store_true", help="print the description as JSON")
    health = commands.add_parser(
        "health", help="exit 0 when the proxy on this host answers /healthz (a HEALTHCHECK)"
    )
    health.add_argument("--url", help="default: http://127.0.0.1:$REPLAY_PROXY_PORT/healthz")
    compare = commands.add_parser(
        "diff", help="compare two trajectories or recordings step by step"
    )
    compare.add_argument("a", type=Path, metavar="A")
    compare.add_argument("b", type=Path, metavar="B")
    compare.add_argument(
        "--mask", metavar="REGEX", action="append", default=[], help="ignore matches (repeatable)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = vars(_parser().parse_args(argv))
    command = args.pop("command")
    if command == "check":
        return check(args["files"], as_json=args["json"])
    if command == "diff":
        return compare(args["a"], args["b"], args["mask"])
    if command == "health":
        return healthcheck(args["url"])
    return serve(args)


def _settings(flags: dict[str, Any]) -> Settings:
    if "trajectory" in flags:
        flags["trajectory"] = tuple(flags["trajectory"])
    for name in ("session_header", "mask"):
        if name in flags:
            flags[name] = tuple(flags[name])
    return Settings(**flags)


def serve(flags: dict[str, Any]) -> int:
    from proxy.app import WORKER_SETTINGS, configure_logging, create_app, settle

    try:
        settings = _settings(flags)
    except ValidationError as exc:
        for error in exc.errors():
            where = "-".join(str(p) for p in error["loc"][:1]).replace("_", "-")
            flag = f"--{where}: " if where else ""
            print(
                f"replay-proxy: {flag}{error['msg'].removeprefix('Value error, ')}", file=sys.stderr
            )
        return EXIT_USAGE
    configure_logging(settings)
    if settings.upstream:
        try:
            forward_proxy(settings.upstream)  # read from the environment once, here first
        except ValueError as exc:
            print(f"replay-proxy: {exc}", file=sys.stderr)
            return EXIT_USAGE
    try:
        library = Library.load(settings.trajectory, settings.trajectory_dir)
    except LibraryError as exc:
        for problem in exc.errors:
            print(f"replay-proxy: {problem}", file=sys.stderr)
        return EXIT_BAD_FILE
    try:
        asyncio.run(_check_store(settings.store))
    except Exception as exc:
        print(f"replay-proxy: --store {settings.store}: {exc}", file=sys.stderr)
        return EXIT_USAGE
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
        print(
            f"replay-proxy: cannot bind {settings.host}:{settings.port}: {exc.strerror}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    port = sock.getsockname()[1]
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    upstream = display(settings.upstream) if settings.upstream else "(none)"
    workers = f", {settings.workers} workers on {settings.store}" if settings.workers > 1 else ""
    print(
        f"replay-proxy: {len(library)} trajectories, upstream {upstream}{workers}; "
        f"listening on http://{host}:{port}/v1",
        flush=True,
    )
    common: dict[str, Any] = {
        "log_config": None,
        "log_level": settings.log_level.value,
        "access_log": False,
        "lifespan": "on",
        "timeout_keep_alive": settings.keep_alive_timeout,
        "timeout_graceful_shutdown": settings.shutdown_timeout,
        "proxy_headers": False,  # nothing reads the client address; one less layer per request
        "server_header": False,  # a forwarded answer keeps the upstream's, not a second one
    }
    if settings.workers > 1:
        os.environ[WORKER_SETTINGS] = settings.worker_env()
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
        return 0
    app = create_app(settings, library=library)
    settle()
    uvicorn.Server(uvicorn.Config(app, **common)).run(sockets=[sock])  # run() sets up uvloop
    return 0


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


def check(files: Sequence[Path], *, as_json: bool = False) -> int:
    failed = False
    described: list[dict[str, Any]] = []
    for path in files:
        try:
            trajectory = load_file(path)
        except LoadError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
            continue
        if as_json:
            described.append(trajectory.summary())
        else:
            print(describe(trajectory))
    if as_json:
        sys.stdout.write(orjson.dumps(described, option=orjson.OPT_INDENT_2).decode() + "\n")
    return EXIT_BAD_FILE if failed else 0


def healthcheck(url: str | None) -> int:
    port = os.environ.get("REPLAY_PROXY_PORT", "8080")
    url = url or f"http://127.0.0.1:{port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            healthy = answer.status == 200
    except (OSError, ValueError) as exc:
        print(f"replay-proxy: {url}: {exc}", file=sys.stderr)
        return 1
    return 0 if healthy else 1


def compare(a: Path, b: Path, masks: Sequence[str]) -> int:
    try:
        patterns = compile_masks(masks)
    except re.error as exc:
        print(f"replay-proxy: --mask: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        left, right = load_file(a), load_file(b)
    except LoadError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_BAD_FILE
    reports = diff(left, right, patterns)
    for report in reports:
        print(report)
    if not reports:
        print(f"{a} and {b} agree step for step")
    return EXIT_BAD_FILE if reports else 0


def _short(text: str, limit: int = 100) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(t: Trajectory) -> str:
    lines = [
        f"{t.source}: {t.format}, {len(t.turns)} turns, {t.tool_call_count} tool calls",
        f"  task: {_short(t.task) if t.task is not None else '(none: no user message)'}",
    ]
    for turn in t.turns:
        for user in turn.users_before:
            lines.append(
                f"  user message {user.index} comes before turn {turn.number} (spliced live)"
            )
        parts = [f"{len(turn.tool_calls)} tool call(s)" if turn.tool_calls else "text only, final"]
        if turn.reasoning:
            parts.append("reasoning")
        lines.append(f"  turn {turn.number} (message {turn.index}): {', '.join(parts)}")
        if turn.text:
            lines.append(f"    text: {_short(turn.text)}")
        for call in turn.tool_calls:
            lines.append(f"    {call.name} [{call.id}] {_short(call.arguments)}")
    for user in t.trailing_users:
        lines.append(f"  user message {user.index} trails the last turn (spliced live)")
    for note in t.skipped:
        lines.append(f"  skipped message {note.index}: {note.reason}")
    for note in t.dropped:
        lines.append(f"  dropped message {note.index}: {note.reason}")
    if not t.turns:
        lines.append("  warning: no scripted turns; every request of its session goes upstream")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
