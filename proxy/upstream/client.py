"""Upstream: the real LLM behind the proxy, reached through one aiohttp client per process.

A request goes out with its path and query exactly as the caller sent them (still
percent-encoded), under the upstream's base path; the answer's status and headers come back as they
are, its body as it arrives (proxy.upstream.passthrough). A request is sent once: if the upstream
closes without answering, the caller gets a 502 saying so, never a second, possibly billed, copy.
Failures before the answer starts become OpenAI-shaped errors that name the upstream (never its
credentials) and say what went wrong.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

import aiohttp
from yarl import URL

from proxy.errors import (
    NoUpstream,
    UpstreamBadAnswer,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from proxy.upstream.dialect import BARE, Dialect
from proxy.upstream.headers import request_headers, swap_query_key, via
from proxy.upstream.passthrough import Answer, OnComplete, PassThrough
from proxy.upstream.pool import Pool, display, forward_proxy, open_session
from proxy.upstream.template import (
    HANDOFF_HEADERS,
    Target,
    fields,
    parse_header,
    refuse_dot_segments,
)

READ_WHOLE = 1024 * 1024  # a sized answer up to this is read whole before it is passed on


class Upstream:
    def __init__(
        self,
        base_url: str | None,
        *,
        api_key: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 600.0,
        total_timeout: float | None = None,
        copy_limit: int = 0,  # the largest answer copied to record: the app gives --max-body-bytes
        instance: str = "",
        headers: Sequence[str] = (),
    ) -> None:
        self.base_url = base_url.rstrip("/") if base_url else None
        self.name = display(self.base_url) if self.base_url else "(none)"
        self._api_key = api_key
        self._secret = api_key.encode() if api_key else None
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.total_timeout = total_timeout
        self._copy_limit = copy_limit
        self.mark = via(instance or secrets.token_hex(8))  # what a request that came back carries
        self._session: aiohttp.ClientSession | None = None
        self.proxy: str | None = None
        self.target: Target | None = None  # the parts filled in per session, when there are any
        # base URLs (per session: where()) that refused a WebSocket: HTTP there from then on
        self.no_socket: set[str] = set()
        lines = tuple(parse_header(spec) for spec in headers)
        if self.base_url:
            base = URL(self.base_url)  # the base path percent-encoded once, as yarl writes it
            self._origin = str(base.origin())
            self._prefix = base.raw_path.rstrip("/")
            if fields(self.base_url) or lines:
                parts = urlsplit(self.base_url)  # as written: yarl would encode the braces
                self.target = Target(parts.path.rstrip("/"), parts.query, lines)
            self.proxy = forward_proxy(self.base_url)  # a bad one stops start-up (ValueError)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def connections(self) -> dict[str, int]:
        """Connections to the upstream: open in all, and idle in the pool among them."""
        pool = self._session.connector if self._session is not None else None
        return pool.counts() if isinstance(pool, Pool) else {"open": 0, "idle": 0}

    def where(self, values: Mapping[str, str]) -> str:
        """The upstream's base URL for these values, as the status shows where a session went."""
        if self.base_url is None or self.target is None:
            return self.name
        path, query = self.target.base(values)
        return self._origin + path + (f"?{query}" if query else "")

    def url(
        self,
        raw_path: str,
        query: str,
        values: Mapping[str, str] | None = None,
        dialect: Dialect = BARE,
    ) -> URL:
        """/v1/chat/completions -> {base path}/chat/completions: the base URL already ends in /v1.
        A dialect that keeps the version (Gemini's /v1beta/..., /v1alpha/...) goes under the base
        URL's root: a base path ending in /v1 loses that /v1. A BadRequest, before anything is
        sent, for a path with a "." or ".." segment (it could climb out of the base path), and,
        for an upstream per session, for a query naming a parameter the template sets or a value
        that is not a name."""
        if self.base_url is None:
            raise NoUpstream(
                "this proxy has no upstream configured (--upstream), so a request that is not "
                "answered from a script cannot be served"
            )
        refuse_dot_segments(raw_path)  # the front refused these already: here for every caller
        prefix = self._prefix
        if self.target is not None:
            prefix, base_query = self.target.base(values or {})
            if base_query:
                self.target.own(query)
                query = f"{base_query}&{query}" if query else base_query
        if dialect.keeps_version:
            prefix = prefix.removesuffix("/v1")
            rest = raw_path
        else:
            rest = raw_path[3:] if raw_path == "/v1" or raw_path.startswith("/v1/") else raw_path
        target = self._origin + prefix + rest
        return URL(f"{target}?{query}" if query else target, encoded=True)

    def client(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None:  # made on the running loop, at the first request
            session = self._session = open_session(
                connect_timeout=self.connect_timeout,
                read_timeout=self.read_timeout,
                total_timeout=self.total_timeout,
            )
        return session

    def outgoing(
        self,
        raw_path: str,
        query: str,
        headers: Iterable[tuple[bytes, bytes]],
        *,
        values: Mapping[str, str] | None = None,
        dialect: Dialect,
        identity: bool = False,
    ) -> tuple[URL, list[tuple[str, str]]]:
        """Where a request goes and the headers it carries there (over HTTP, or the upgrade of
        a socket: proxy.upstream.socket): the proxy's key for the client's, the per-session
        header lines for the client's own, and the Via mark."""
        in_query = False
        if self._api_key is not None and dialect.key_query is not None:
            swapped = swap_query_key(query, self._api_key, dialect.key_query)
            in_query, query = swapped != query, swapped
        url = self.url(raw_path, query, values, dialect)
        forwarded = request_headers(
            headers,
            api_key=self._api_key,
            identity=identity,
            dialect=dialect,
            key_in_query=in_query,
            mark=self.mark,
        )
        if values and values.get("handoff_turn"):  # a resumed session's live call: the cut
            forwarded += [(name, values[key]) for name, key in HANDOFF_HEADERS if values.get(key)]
        if self.target is not None and self.target.headers:  # ours, never the client's
            own = self.target.header_lines(values or {})
            names = {name for name, _ in own}
            forwarded = [h for h in forwarded if h[0].lower() not in names] + own
        return url, forwarded

    async def send(
        self,
        method: str,
        raw_path: str,
        query: str,
        headers: Iterable[tuple[bytes, bytes]],
        body: bytes,
        *,
        on_complete: OnComplete | None = None,
        keep_body: bool = False,
        values: Mapping[str, str] | None = None,
        dialect: Dialect,
    ) -> PassThrough:
        """`values`: the session's {session} and {trajectory}, for a per-session upstream;
        `dialect`: the API's way with paths and keys."""
        url, forwarded = self.outgoing(
            raw_path, query, headers, values=values, dialect=dialect, identity=keep_body
        )
        try:
            answer = await self.client().request(
                method,
                url,
                headers=forwarded,
                data=body or None,
                allow_redirects=False,  # a redirect is the caller's to follow, as it came
                proxy=self.proxy,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise self.failed(exc) from None
        if not 200 <= answer.status <= 599:  # 1xx are skipped by aiohttp; 101 comes through
            answer.close()
            raise UpstreamBadAnswer(
                f"the upstream {self.name} answered with status {answer.status}, which cannot be "
                "passed on as an answer"
                + (" (it switched protocols unasked)" if answer.status == 101 else "")
            )
        whole = None
        length = answer.content_length
        if method == "HEAD" or (length is not None and length <= READ_WHOLE):
            try:  # it usually came with the head: one send, no watcher
                whole = await answer.read()
            except (TimeoutError, aiohttp.ClientError) as exc:
                answer.close()
                raise self.failed(exc) from None
        return self.pass_on(answer, whole=whole, on_complete=on_complete, keep_body=keep_body)

    def pass_on(
        self,
        answer: Answer,
        *,
        whole: bytes | None = None,
        on_complete: OnComplete | None = None,
        keep_body: bool = False,
    ) -> PassThrough:
        """An answer sent on to the client, the proxy's key masked in it."""
        return PassThrough(
            answer,
            whole=whole,
            on_complete=on_complete,
            keep_body=keep_body,
            secret=self._secret,
            copy_limit=self._copy_limit,
        )

    def failed(self, exc: BaseException) -> UpstreamError:
        """What went wrong before an answer, in words: the exception's type says most of it."""
        name = self.name
        if isinstance(exc, aiohttp.ConnectionTimeoutError):
            return UpstreamTimeout(
                f"the upstream {name} did not accept a connection within {self.connect_timeout:g} s"
            )
        if isinstance(exc, asyncio.TimeoutError):  # aiohttp's read timeouts are TimeoutErrors too
            if isinstance(exc, aiohttp.SocketTimeoutError) or self.total_timeout is None:
                wait = f"no data for {self.read_timeout:g} s"
            else:
                wait = f"no whole answer within {self.total_timeout:g} s"
            return UpstreamTimeout(f"the upstream {name} did not answer in time: {wait}")
        if isinstance(exc, aiohttp.ClientProxyConnectionError):
            assert self.proxy is not None
            return UpstreamUnreachable(
                f"the forward proxy {display(self.proxy)} (from the environment) cannot be "
                f"reached on the way to {name}: {_reason(exc)}"
            )
        if isinstance(exc, aiohttp.ClientHttpProxyError):
            assert self.proxy is not None
            return UpstreamUnreachable(
                f"the forward proxy {display(self.proxy)} (from the environment) refused the "
                f"connection to {name}: {exc.status} {exc.message}"
            )
        if isinstance(exc, aiohttp.ClientConnectorCertificateError):
            return UpstreamUnreachable(
                f"the upstream {name} cannot be reached: its TLS certificate is not trusted "
                f"({exc.certificate_error}); set SSL_CERT_FILE to a CA bundle that signs it"
            )
        if isinstance(exc, aiohttp.ServerDisconnectedError):
            return UpstreamUnreachable(
                f"the upstream {name} closed the connection without answering; the request may "
                "have reached it, so it was not sent again"
            )
        if isinstance(exc, aiohttp.ClientPayloadError):
            return UpstreamBadAnswer(f"the upstream {name}'s answer broke off: {exc}")
        if isinstance(exc, aiohttp.ClientResponseError):  # the head did not parse
            return UpstreamBadAnswer(
                f"the upstream {name} sent an answer that is not valid HTTP: {exc.message}"
            )
        return UpstreamUnreachable(f"the upstream {name} cannot be reached: {_reason(exc)}")


def _reason(exc: BaseException) -> str:
    """The OS's words for a connection error, without the address aiohttp repeats."""
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, OSError) and os_error.strerror:
        return os_error.strerror
    text = str(exc)
    return text.split("] ", 1)[-1] if text else type(exc).__name__
