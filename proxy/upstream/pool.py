"""The upstream's connections: aiohttp's pool, with what it trusts and which way it goes read from
the environment once, at start.

- TLS: the CA bundle in SSL_CERT_FILE, or the folder in SSL_CERT_DIR, else the system's store.
- A forward proxy from HTTP_PROXY / HTTPS_PROXY / ALL_PROXY (either case), unless NO_PROXY names the
  upstream's host: the standard library's reading of them, as curl and requests read them. The
  upstream is one base URL, so this is decided once, not looked up on every request.
- No cookie jar: a cookie the upstream sets for one caller must never go out with another's
  request. No auto-added headers: the caller's own Accept, User-Agent and Content-Type go upstream
  as they came, and no others.
"""

from __future__ import annotations

import os
import ssl
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import aiohttp

# under uvicorn's default of 5 s, the shortest keep-alive of the servers LLMs run behind (vLLM,
# SGLang, LiteLLM): a pooled connection is let go before the upstream would close it under a request
KEEP_ALIVE = 4.0
READ_BUFFER = 2**16  # aiohttp stops reading an answer while twice this waits to be sent on


class Pool(aiohttp.TCPConnector):
    """aiohttp's TCPConnector, except that a pooled connection on which the upstream sent anything
    while it sat idle is closed, not reused. aiohttp 3.14 parses and queues such bytes and hands
    the connection to the next request, which would then get the queued answer: an answer crossed
    between two callers (aio-libs/aiohttp#13656). The repair sits on the connector's public
    `connect()` and asks the connection's protocol what aiohttp itself asks when a connection is
    released (`should_close`); a new connection never has anything queued."""

    async def connect(self, *args: Any, **kwargs: Any) -> aiohttp.connector.Connection:
        while True:
            conn = await super().connect(*args, **kwargs)
            if conn.protocol is None or not conn.protocol.should_close:
                return conn
            conn.close()  # and take the next idle one, or a new one

    def counts(self) -> dict[str, int]:
        """Connections open to the upstream, and idle in the pool among them (what an operator,
        and the soak test, watch for leaks). aiohttp has no public count; its own fields are read
        here, in the one class that already depends on its internals."""
        idle = sum(len(conns) for conns in self._conns.values())
        return {"open": idle + len(self._acquired), "idle": idle}


def tls_context() -> ssl.SSLContext:
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    return ssl.create_default_context(cafile=cafile, capath=capath)


def forward_proxy(url: str) -> str | None:
    """The forward proxy the environment names for `url`, or None."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    found = proxies.get(parts.scheme) or proxies.get("all")
    if not found or urllib.request.proxy_bypass(parts.netloc):
        return None
    if "://" not in found:  # HTTP_PROXY=proxy.corp:3128, as curl accepts it
        found = "http://" + found
    scheme = urlsplit(found).scheme
    if scheme not in ("http", "https"):
        raise ValueError(
            f"the forward proxy {display(found)} from the environment is {scheme}://; "
            "only http:// and https:// proxies are supported"
        )
    return found


def display(url: str) -> str:
    """The URL without user:password, for messages and logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def open_session(
    *, connect_timeout: float, read_timeout: float, total_timeout: float | None
) -> aiohttp.ClientSession:
    """One per process, made on the running loop."""
    return aiohttp.ClientSession(
        connector=Pool(limit=0, ssl=tls_context(), keepalive_timeout=KEEP_ALIVE),
        timeout=aiohttp.ClientTimeout(
            total=total_timeout,
            connect=connect_timeout,  # a connection (through a forward proxy too)
            sock_connect=connect_timeout,
            sock_read=read_timeout,  # silence, before the head and between reads of the body
        ),
        cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
        auto_decompress=False,  # bodies pass through as the upstream encoded them
        trust_env=False,  # the environment is read once (above), not on every request
        read_bufsize=READ_BUFFER,
    )
