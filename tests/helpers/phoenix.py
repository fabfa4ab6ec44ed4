"""Arize Phoenix, a real OTLP receiver, installed from the package index into the harness cache
(tests/helpers/harness/install.py's folder) and started on loopback ports for a test.

Phoenix binds its OTLP/gRPC port on every interface (`[::]`, written in its code); the tests
serve on loopback only, so it is started through a small launcher that puts that port on
127.0.0.1. Its HTTP port serves OTLP/HTTP at /v1/traces and the REST API that lists a project's
spans (GET /v1/projects/{project}/spans).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.helpers.harness.install import CACHE, Unavailable, _run

VERSION = "20.26.1"
LAUNCH = """
import sys
import grpc.aio

made = grpc.aio.server


def on_loopback(*args, **kwargs):
    server = made(*args, **kwargs)
    add = server.add_insecure_port
    server.add_insecure_port = lambda address: add(address.replace("[::]", "127.0.0.1", 1))
    return server


grpc.aio.server = on_loopback
from phoenix.server.main import main

sys.argv = ["phoenix", "serve"]
main()
"""


def install(log: Path) -> Path:
    """Phoenix's Python, installed unless the cache has it."""
    where = CACHE / f"venv-phoenix-{VERSION}"
    python = where / "bin/python"
    done = CACHE / f".installed-{where.name}"
    if python.exists() and done.exists():
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        try:
            _run([sys.executable, "-m", "venv", "--clear", str(where)], dict(os.environ), out)
            pip = [str(where / "bin/pip"), "install", "-q", f"arize-phoenix=={VERSION}"]
            _run(pip, dict(os.environ), out)
        except RuntimeError as exc:
            raise Unavailable(f"{exc}; see {log}") from None
    done.write_text(VERSION)
    return python


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(python: Path, folder: Path) -> Iterator[str]:
    """Phoenix on loopback ports, its data in `folder`; yields its base URL. Stopped by its pid."""
    port, grpc = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_WORKING_DIR": str(folder),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_AGENTS_DISABLE_BASH": "true",
        "HOME": str(folder),  # nothing of it lands in the user's home
    }
    log = (folder / "phoenix.log").open("w")
    process = subprocess.Popen(
        [str(python), "-c", LAUNCH], env=env, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, folder / "phoenix.log")
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until its health check answers (it migrates its database first), or it has died."""
    with httpx.Client(timeout=2) as client:
        for _ in range(600):
            if process.poll() is not None:
                raise RuntimeError(
                    f"Phoenix exited with {process.returncode}: {log.read_text()[-2000:]}"
                )
            try:
                if client.get(url + "/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(0.2)  # not a sleep: it returns at once if Phoenix dies
    raise RuntimeError(f"Phoenix did not start: {log.read_text()[-2000:]}")
