"""What crosses the proxy in each direction: the request's headers on their way upstream, the
answer's on their way back.

Hop-by-hop headers (RFC 9110 section 7.6.1), and every header the `Connection` header names, belong
to one connection and never cross. `Expect` is dropped too: the proxy has read the whole body
before it forwards anything, so an upstream's `100 Continue` could only be mistaken for an answer.
The proxy's own `x-replay-*` headers stay here, and with `--upstream-api-key` the client's
credentials are replaced by the proxy's, in the way the client sent them. Every forwarded request
carries the proxy's mark in a `Via` header, as HTTP proxies do, so that a request that comes back
(an upstream pointing at the proxy itself) is refused instead of forwarded again, forever.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote, unquote

from proxy.upstream.dialect import Dialect

# names as bytes, lower-case: ASGI gives request header names in lower case
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
    }
)
# the client library frames the body and names the host itself
_NOT_FORWARDED = HOP_BY_HOP | {b"host", b"content-length", b"expect"}
_NOT_FORWARDED_IDENTITY = _NOT_FORWARDED | {b"accept-encoding"}
# the answer's Date is the proxy's (uvicorn adds it): the upstream's would make a second one
_NOT_RETURNED = HOP_BY_HOP | {b"date"}


def via(instance: str) -> bytes:
    """The Via value this proxy adds to what it forwards."""
    return b"1.1 replay-proxy-" + instance.encode()


def came_back(headers: Iterable[tuple[bytes, bytes]], mark: bytes) -> bool:
    """The request carries this proxy's own Via mark: it went out from here before."""
    return any(name == b"via" and mark in value for name, value in headers)


def _named_in_connection(values: Iterable[bytes]) -> set[bytes]:
    return {name.strip().lower() for value in values for name in value.split(b",")}


def request_headers(
    headers: Iterable[tuple[bytes, bytes]],
    *,
    api_key: str | None,
    identity: bool = False,
    dialect: Dialect,
    key_in_query: bool = False,
    mark: bytes | None = None,
) -> list[tuple[str, str]]:
    """The headers to send upstream, as the client library takes them. `identity` asks for an
    uncompressed answer (the proxy keeps a copy to record). `dialect`: where the API takes a key;
    `key_in_query`: the key was swapped into the client's own ?key= already."""
    drop = _NOT_FORWARDED_IDENTITY if identity else _NOT_FORWARDED
    out: list[tuple[bytes, bytes]] = []
    connection: list[bytes] = []
    for pair in headers:  # one pass; the pairs are kept as they are
        name = pair[0]
        if name in drop:
            if name == b"connection":
                connection.append(pair[1])
        elif name[:9] != b"x-replay-":
            out.append(pair)
    if connection:
        named = _named_in_connection(connection)
        out = [h for h in out if h[0] not in named]
    if identity:
        out.append((b"accept-encoding", b"identity"))
    if mark is not None:
        out.append((b"via", mark))  # a line of its own: the client's Via lines go on as they are
    if api_key is not None:
        out = _swap_credentials(out, api_key.encode(), dialect, key_in_query)
    # header values are bytes on the wire; latin-1 keeps every byte as it came
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in out]


def _swap_credentials(
    headers: list[tuple[bytes, bytes]], key: bytes, dialect: Dialect, key_in_query: bool
) -> list[tuple[bytes, bytes]]:
    credentials = dialect.credentials
    used = {h[0] for h in headers if h[0] in credentials}
    out = [h for h in headers if h[0] not in credentials] if used else headers
    if dialect.key_header is not None:  # the API's own key header, not a Bearer
        if b"authorization" in used:  # an OAuth client: keep its way
            out.append((b"authorization", b"Bearer " + key))
        elif not key_in_query:
            out.append((dialect.key_header, key))
        return out
    other = dialect.client_key
    if other is not None and other in used:  # a client that sends its key there: keep its way
        out.append((other, key))
    if other is None or other not in used or b"authorization" in used:
        out.append((b"authorization", b"Bearer " + key))
    return out


def swap_query_key(query: str, key: str, name: str = "key") -> str:
    """A client may send its key in the query (?key=...): it is swapped for --upstream-api-key
    too."""
    start = f"{name}="
    if start not in query:
        return query
    parts = query.split("&")
    swapped = [f"{start}{quote(key, safe='')}" if p.startswith(start) else p for p in parts]
    return "&".join(swapped)


def query_key(query: str, name: str = "key") -> str | None:
    """The value of a query credential (?key=...), as sent (to be scrubbed from what is
    written)."""
    start = f"{name}="
    for part in query.split("&"):
        if part.startswith(start) and len(part) > len(start):
            return unquote(part[len(start) :])
    return None


def answer_headers(raw: Iterable[tuple[bytes, bytes]]) -> tuple[list[tuple[bytes, bytes]], str]:
    """The upstream answer's headers to pass on (names as the upstream wrote them), and its
    content type."""
    pairs = list(raw)
    connection = [value for name, value in pairs if name.lower() == b"connection"]
    drop = _NOT_RETURNED | _named_in_connection(connection) if connection else _NOT_RETURNED
    out = []
    content_type = b""
    for name, value in pairs:
        lower = name.lower()
        if lower not in drop:
            out.append((name, value))
            if lower == b"content-type" and not content_type:
                content_type = value
    return out, content_type.decode("latin-1")
