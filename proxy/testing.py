"""Replay in your own test suite: the proxy in-process, on a free loopback port.

    from proxy.testing import ReplayProxy

    with ReplayProxy(trajectories=["tests/data/run.jsonl"], mode="strict") as proxy:
        run_my_agent(base_url=proxy.base_url)          # http://127.0.0.1:PORT/v1
        assert proxy.status("my-session")["complete"]

Under pytest the `replay_proxy` fixture does the same and stops every proxy it started:

    def test_agent(replay_proxy):
        proxy = replay_proxy(trajectories=["tests/data/run.jsonl"], mode="strict")
        ...

Any setting of `replay-proxy serve` can be given by name (mode="strict", mask=[...],
upstream="http://...", record_dir=...). As `serve` does, a proxy given no admin_token makes one
(`proxy.admin_token`): `status()` and `sessions()` send it, and a request that chooses its script
by header (x-replay-trajectory) sends it as x-replay-token (`proxy.binding_headers`).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import uvicorn


@contextmanager
def serving(app: Any, sock: socket.socket | None = None, **config: Any) -> Iterator[str]:
    """Serve an ASGI app on 127.0.0.1:<free port> (or on `sock`, from `listening()`) in a
    thread; yields the root URL. `config` goes to uvicorn.Config (ssl_certfile and ssl_keyfile
    serve HTTPS: the URL says https).

    The socket listens before the thread starts, so clients can connect at once (the kernel
    queues them until uvicorn accepts): nothing has to wait or poll."""
    sock = sock or listening()
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            log_config=None,
            server_header=False,
            **config,
        )
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        scheme = "https" if config.get("ssl_certfile") else "http"
        yield f"{scheme}://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def listening() -> socket.socket:
    """A socket listening on 127.0.0.1:<free port>, as `replay-proxy serve` sets it up."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as `replay-proxy serve` does
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    return sock


def all_sessions(url: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every session's status from the proxy at `url` (its root or its /v1 URL), oldest first,
    following the list's pages."""
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 1000}
    while True:
        answer = httpx.get(
            url.removesuffix("/v1") + "/replay/sessions", params=params, headers=headers, timeout=60
        )
        answer.raise_for_status()
        page = answer.json()
        found += page["data"]
        if not page["has_more"]:
            return found
        params["cursor"] = page["next_cursor"]


class ReplayProxy:
    def __init__(
        self, *, trajectories: list[str | Path] | tuple[str | Path, ...] = (), **settings: Any
    ) -> None:
        from proxy.admin_token import make
        from proxy.config import Settings

        if settings.get("admin_token") is None and not settings.get("insecure_admin"):
            settings["admin_token"] = make()  # as serve makes one: the admin API is never open
        self.settings = Settings(trajectory=tuple(Path(t) for t in trajectories), **settings)
        self._serving: Any = None
        self.url = ""  # the root URL, e.g. http://127.0.0.1:41234

    @property
    def base_url(self) -> str:
        """What to give a harness as its OpenAI base URL."""
        return self.url + "/v1"

    def __enter__(self) -> ReplayProxy:
        from proxy.app import create_app

        self._serving = serving(create_app(self.settings), **self.settings.socket_server())
        self.url = self._serving.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._serving is not None:
            self._serving.__exit__(kind, error, tb)
            self._serving = None

    @property
    def admin_token(self) -> str | None:
        token = self.settings.admin_token
        return token.get_secret_value() if token is not None else None

    @property
    def binding_headers(self) -> dict[str, str]:
        """What a request that names its script (x-replay-trajectory) sends with it."""
        token = self.admin_token
        return {"x-replay-token": token} if token is not None else {}

    def _admin(self) -> dict[str, str]:
        token = self.admin_token
        return {"authorization": f"Bearer {token}"} if token is not None else {}

    def status(self, session: str) -> dict[str, Any]:
        """The session's status, as GET /replay/sessions/{session} reports it."""
        r = httpx.get(f"{self.url}/replay/sessions/{session}", headers=self._admin())
        r.raise_for_status()
        result: dict[str, Any] = r.json()
        return result

    def sessions(self) -> list[dict[str, Any]]:
        """Every session's status, oldest first (all the pages)."""
        return all_sessions(self.url, self._admin())


try:
    import pytest
except ImportError:  # only the pytest plugin needs pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def replay_proxy() -> Iterator[Callable[..., ReplayProxy]]:
        """replay_proxy(trajectories=[...], **settings) -> a running ReplayProxy."""
        started: list[ReplayProxy] = []

        def start(**settings: Any) -> ReplayProxy:
            proxy = ReplayProxy(**settings).__enter__()
            started.append(proxy)
            return proxy

        yield start
        for proxy in reversed(started):
            proxy.__exit__(None, None, None)
