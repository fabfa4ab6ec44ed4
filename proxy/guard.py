"""Guard: which requests may use the proxy, judged from their headers before the body is read.

A web page the user has open can reach a proxy on loopback. Two ways matter:
- a page on another site sends a CORS "simple" request (text/plain, form or multipart body, no
  preflight): its response is hidden from the page, but the request still happens, with the
  operator's --upstream-api-key. Completion and forwarded endpoints therefore take only JSON
  bodies (any other type needs a preflight, which the proxy never approves) and refuse an
  `Origin` that is not local;
- a page that rebinds its own DNS name to 127.0.0.1 is same-origin with the proxy, so the
  browser lets it read every answer. Its requests carry its own name in `Host`: without an admin
  token the admin API answers only a `Host` that is an IP address, `localhost` or listed in
  --allowed-host (a rebinding page never has an IP address as its name); with the operator's
  --upstream-api-key, so do the completion and forwarded endpoints.
Harnesses send JSON and neither `Origin` nor `Sec-Fetch-Site`, so none of this touches them.

A reverse proxy in front passes the browser's `Host` on (the documented nginx block does) or names
it in `X-Forwarded-Host` / `Forwarded: host=`: every name a request carries is judged, never only
the one the front put in `Host`. Where a request came from is never a reason to trust it: a
token-less admin API (--insecure-admin) also refuses a request that says it came through a front.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping

from proxy.admin_token import matches
from proxy.errors import CrossSiteRefused, Unauthorized, UnsupportedMediaType


def host_of(authority: str) -> str:
    """The host of `host[:port]` or `[v6]:port`, lower case, without the brackets."""
    text = authority.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text[1:]
    if text.count(":") == 1:
        return text.split(":", 1)[0]
    return text  # a bare IPv6 address, or a name


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class Guard:
    def __init__(
        self,
        allowed_hosts: Iterable[str] = (),
        *,
        admin_token: bool = False,
        upstream_key: bool = False,
        binding_token: str | None = None,
    ) -> None:
        names = {h.strip().lower() for h in allowed_hosts if h.strip()}
        self.any_host = "*" in names
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))  # "*.corp" -> ".corp"
        self.names = frozenset(n for n in names if not n.startswith("*"))
        self.admin_token = admin_token
        # with the operator's key, the proxy adds credentials: a rebinding page must not get them
        self.upstream_key = upstream_key
        self._hosts: dict[str, bool] = {}  # Host header -> local, for the few a proxy sees
        # choosing a script by request needs this token in x-replay-token (None: anyone may)
        self.binding_token = binding_token

    def _listed(self, host: str) -> bool:
        if self.any_host or host in self.names or host == "localhost":
            return True
        return host.endswith(".localhost") or bool(self.suffixes and host.endswith(self.suffixes))

    def local_host(self, host: str) -> bool:
        """A Host a rebinding page cannot send: an IP address (a page is same-origin with an
        address only when it was loaded from it), localhost, or a name listed."""
        return self._listed(host) or _ip(host) is not None

    def local_origin(self, origin: str) -> bool:
        """An Origin: a page served from loopback, localhost, or a name listed. A page served
        from any other address is another site; `null` (a sandboxed frame, a file) too."""
        scheme, sep, rest = origin.partition("://")
        if not sep or scheme not in ("http", "https"):
            return False
        host = host_of(rest.split("/", 1)[0])
        if self._listed(host):
            return True
        address = _ip(host)
        return address is not None and address.is_loopback

    def cross_site(self, headers: Mapping[str, str], where: str) -> None:
        """Refuse a request a browser sent from a page that is not local."""
        origin = headers.get("origin")
        if origin is not None:
            if not self.local_origin(origin):
                raise CrossSiteRefused(
                    f"{where} refused a request from the web page {origin[:100]!r}: a page on "
                    "another site must not drive the proxy; a page of your own can be allowed "
                    "by its host name with --allowed-host",
                    param="origin",
                )
        elif headers.get("sec-fetch-site") == "cross-site":
            raise CrossSiteRefused(
                f"{where} refused a request a browser sent from another site "
                "(Sec-Fetch-Site: cross-site)",
                param="sec-fetch-site",
            )

    def api(self, headers: Mapping[str, str]) -> None:
        """Completion and forwarded endpoints: no foreign page, with the operator's key no name
        a page could rebind, and a body only as JSON."""
        self.cross_site(headers, "the proxy")
        if self.upstream_key:
            self._host(headers, "the proxy (it sends --upstream-api-key upstream)")
        length = headers.get("content-length")
        if length in (None, "0") and headers.get("transfer-encoding") is None:
            return  # no body: nothing a page could smuggle in
        kind = headers.get("content-type")
        if kind != "application/json" and (kind is None or not is_json(kind)):
            sent = f"Content-Type {kind[:100]!r}" if kind is not None else "no Content-Type"
            raise UnsupportedMediaType(
                f"the request body was sent with {sent}; the proxy takes only JSON bodies "
                "(Content-Type: application/json), so that no web page can send one to it "
                "without the browser asking first",
                param="content-type",
            )

    def binding(self, headers: Mapping[str, str], *, named: bool) -> None:
        """A request that chooses its session's script (x-replay-trajectory, or the path's
        /t/{name}/: `named`) or branches it (x-replay-turns, the path's /k/{K}/: `named` too)
        decides which commands the harness
        runs: with an admin token, only with that token in x-replay-token."""
        if self.binding_token is None:
            return
        asked = next((h for h in CHOOSING if headers.get(h) is not None), None)
        if asked is None and named:
            asked = "the path's /t/{name}/ or /k/{K}/"
        if asked is None:
            return
        given = headers.get(TOKEN_HEADER)
        if given is None or not matches(self.binding_token, given):
            said = "without" if given is None else "with a wrong"
            raise Unauthorized(
                f"{asked} chooses the session's script, so which commands the harness runs, and "
                f"came {said} admin token: send the admin token in {TOKEN_HEADER} (it is never "
                "forwarded), set the session's script through the admin API (PUT "
                "/replay/sessions/{session}), or start the proxy with --open-binding",
                param=TOKEN_HEADER,
            )

    def admin(self, headers: Mapping[str, str], *, page: bool = False) -> None:
        """/replay/*: no foreign page; and without a token, no name a page could rebind.
        `page`: a GET of the status page, which a link on another site may open (the page that
        links cannot read it)."""
        navigation = page and headers.get("sec-fetch-mode") == "navigate"
        if not navigation:
            self.cross_site(headers, "the admin API")
        if not self.admin_token:  # a page cannot send the Bearer token; the cookie is SameSite
            self._host(headers, "the admin API (without --admin-token)")
            fronted = next((h for h in FORWARDING if headers.get(h) is not None), None)
            if fronted is not None:
                raise CrossSiteRefused(
                    f"the admin API refused a request that came through a reverse proxy "
                    f"({fronted} is set): without an admin token it would answer anyone who "
                    "reaches the front; give the proxy --admin-token (or let it make one)",
                    param=fronted,
                )

    def _host(self, headers: Mapping[str, str], what: str) -> None:
        host = headers.get("host")
        if host is None:
            return  # not a browser: every browser names the host
        for name in _forwarded_hosts(headers):  # a front's: judged as the Host it stands for
            self._judge_host(name, what)
        self._judge_host(host, what)

    def _judge_host(self, host: str, what: str) -> None:
        local = self._hosts.get(host)
        if local is None:
            local = self.local_host(host_of(host))
            if len(self._hosts) < 1024:
                self._hosts[host] = local
        if not local:
            raise CrossSiteRefused(
                f"{what} refused a request addressed to {host[:100]!r}: it answers only "
                "requests for an IP address, localhost or a name given with --allowed-host, as "
                "a web page can point a name of its own at this machine; use "
                "http://127.0.0.1:PORT, or allow the name with "
                f"--allowed-host {host_of(host)[:100]}"
                + ("" if self.upstream_key else ", or set --admin-token"),
                param="host",
            )


# what chooses or branches a session's script, and where the admin token comes with it
CHOOSING = ("x-replay-trajectory", "x-replay-turns")
TOKEN_HEADER = "x-replay-token"
# what a reverse proxy adds to say a request came through it (RFC 7239, and the de facto ones)
FORWARDING = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")


def _forwarded_hosts(headers: Mapping[str, str]) -> list[str]:
    """The host names a front says the request was sent to: X-Forwarded-Host (a list), and each
    host= of Forwarded."""
    names = []
    value = headers.get("x-forwarded-host")
    if value is not None:
        names += [n.strip() for n in value.split(",") if n.strip()]
    value = headers.get("forwarded")
    if value is not None:
        for element in value.replace(",", ";").split(";"):
            key, eq, found = element.strip().partition("=")
            if eq and key.strip().lower() == "host":
                names.append(found.strip().strip('"'))
    return names


def is_json(content_type: str) -> bool:
    """application/json, or application/<something>+json, with any parameters."""
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )
