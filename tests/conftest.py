from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis

from proxy.app import create_app
from proxy.config import Settings
from proxy.testing import serving
from tests.helpers.servers import FakeUpstream, running

ROOT = Path(__file__).parent.parent


@pytest.fixture
def upstream() -> Iterator[tuple[FakeUpstream, str]]:
    """A fake LLM on a free port: (the fake, its base URL including /v1)."""
    fake = FakeUpstream()
    with running(fake.app) as url:
        yield fake, url + "/v1"


ProxyFactory = Callable[..., AbstractContextManager[str]]


@pytest.fixture
def proxy() -> ProxyFactory:
    """proxy(**settings) -> a context manager running the proxy; yields its base URL with /v1.
    Without an admin_token the admin API is served without one (--insecure-admin), as most tests
    drive it; the tests of the token itself give one."""

    @contextmanager
    def start(**settings: Any) -> Iterator[str]:
        if settings.get("admin_token") is None:
            settings.setdefault("insecure_admin", True)
        configured = Settings(**settings)
        app = create_app(configured)
        with serving(app, **configured.socket_server()) as url:
            yield url + "/v1"

    return start


@pytest.fixture
def write_trajectory(tmp_path: Path) -> Callable[..., Path]:
    def write(messages: Any, name: str = "run", folder: Path | None = None) -> Path:
        path = (folder or tmp_path) / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(messages))
        return path

    return write


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server: the one .ci/run started (REPLAY_PROXY_TEST_REDIS_URL), else our own."""
    url = os.environ.get("REPLAY_PROXY_TEST_REDIS_URL")
    if url:
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("REPLAY_PROXY_REQUIRE_REDIS"):
            pytest.fail("redis-server is required (REPLAY_PROXY_REQUIRE_REDIS) but not installed")
        pytest.skip("redis-server is not installed (apt-get install redis-server, or run .ci/run)")
    with own_redis(binary, tmp_path_factory.mktemp("redis")) as (url, _):
        yield url


@contextmanager
def own_redis(binary: str, folder: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A redis-server of one's own on a free loopback port: (its URL, its process)."""
    with socket.socket() as s:  # a free port for redis to take
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(folder),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:  # redis says when it is ready
        if "Ready to accept connections" in line:
            break
    else:
        pytest.fail("redis-server did not start")
    try:
        yield f"redis://127.0.0.1:{port}/0", process
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def redis_url(redis_server: str) -> str:
    """The test's own empty Redis database."""
    client = redis.Redis.from_url(redis_server)
    client.flushdb()
    client.close()
    return redis_server


@pytest.fixture(scope="session")
def forward_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real HTTP forward proxy (tinyproxy, which .ci/run installs) on loopback; yields its URL."""
    binary = shutil.which("tinyproxy")
    if binary is None:
        if os.environ.get("REPLAY_PROXY_REQUIRE_FORWARD_PROXY"):
            pytest.fail("tinyproxy is required (REPLAY_PROXY_REQUIRE_FORWARD_PROXY) but missing")
        pytest.skip("tinyproxy is not installed (apt-get install tinyproxy, or run .ci/run)")
    folder = tmp_path_factory.mktemp("tinyproxy")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = folder / "tinyproxy.conf"
    conf.write_text(
        f"Port {port}\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nMaxClients 64\n"
        "LogLevel Info\n"
    )
    process = subprocess.Popen(
        [binary, "-d", "-c", str(conf)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:  # tinyproxy says when it accepts connections
        if "Accepting connections" in line:
            break
    else:
        pytest.fail("tinyproxy did not start")
    drain = threading.Thread(target=process.stdout.read, daemon=True)  # its log, never blocking it
    drain.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
