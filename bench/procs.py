"""Processes under measurement: start them, learn their URL, read their CPU time and memory."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its children (workers)."""
    return sum(cpu_split(pid))


def cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process and its children (workers)."""
    user = system = 0.0
    for p in [pid, *_children(pid)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        user += int(fields[11]) / TICKS
        system += int(fields[12]) / TICKS
    return user, system


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


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
def process(*argv: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """Start a program that prints '... listening on URL' as its first line; yields (URL, pid)."""
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening on " not in line:
            raise RuntimeError(f"{argv[:3]} did not start: {line!r}")
        yield line.rsplit("listening on ", 1)[1].strip(), proc.pid
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM to its process group, SIGKILL after 30 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def polled(
    argv: list[str], ready_url: str, log: Path, env: dict[str, str] | None = None
) -> Iterator[int]:
    """Start a program that says nothing useful when it is ready (its output goes to `log`), and
    wait until `ready_url` answers at all; yields its pid."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=log.parent,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    try:
        deadline = time.monotonic() + 180  # LiteLLM takes half a minute on a cold cache
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{argv[0]} exited with {proc.returncode}: see {log}")
            try:
                httpx.get(ready_url, timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{argv[0]} did not answer {ready_url}: see {log}") from None
                time.sleep(0.1)
        yield proc.pid
    finally:
        _stop(proc)


def proxy(*args: str) -> AbstractContextManager[tuple[str, int]]:
    return process(
        sys.executable, "-m", "proxy", "serve", "--port", "0", "--log-level", "warning",
        "--insecure-admin", *args,  # the churn suite reads the session list
    )  # fmt: skip


def upstream(chunks: int = 64, delay: float = 0.0) -> AbstractContextManager[tuple[str, int]]:
    return process(
        sys.executable, "-m", "bench.upstream", "--chunks", str(chunks), "--delay", str(delay)
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


NGINX_CONF = """
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_max_body_size 0;
    client_body_buffer_size 4m;  # a long session's request kept in memory, as the proxy keeps it
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    upstream llm {{ server {upstream}; keepalive 256; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://llm;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
"""


@contextmanager
def nginx(upstream_url: str) -> Iterator[tuple[str, int]]:
    """A plain pass-through hop: one worker, no buffering, keep-alive to the upstream."""
    host = upstream_url.removeprefix("http://").split("/", 1)[0]
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        conf = Path(folder) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(folder=folder, upstream=host, port=port))
        proc = subprocess.Popen(
            ["nginx", "-c", str(conf), "-g", "daemon off;"], start_new_session=True
        )
        try:
            for _ in range(200):  # nginx prints nothing when ready: try to connect
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.02)
            else:
                raise RuntimeError(f"nginx did not start on port {port} (see {folder}/error.log)")
            yield f"http://127.0.0.1:{port}/v1", proc.pid
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


@contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway redis-server on a loopback port, for the stores suite; yields its URL."""
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        proc = subprocess.Popen(
            [*argv, "--appendonly", "no", "--dir", folder],
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            for _ in range(200):  # ready when it answers a PING
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        s.sendall(b"PING\r\n")
                        if s.recv(16).startswith(b"+PONG"):
                            break
                time.sleep(0.02)
            else:
                raise RuntimeError(f"redis-server did not start on port {port}")
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
