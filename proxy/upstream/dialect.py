"""How an API's requests go upstream: where the path goes under the base URL, which headers carry
a client's credentials, and where the proxy's own key (--upstream-api-key) goes instead.

An API's row in proxy.apis names its dialect; a forwarded request no API claims goes in the
table's plain dialect (proxy.apis.keys). This layer names no header of any API: each dialect
says its own.
"""

from __future__ import annotations

from dataclasses import dataclass

BEARER = frozenset({b"authorization"})


@dataclass(frozen=True, slots=True)
class Dialect:
    # the path keeps its version (/v1beta/..., /v1/projects/...) and goes under the base URL's
    # root, so a base path ending in /v1 (an upstream that serves both, as a LiteLLM proxy does)
    # loses that /v1; otherwise /v1/... goes under the base URL, which already ends in /v1
    keeps_version: bool = False
    # the API's own key header: the proxy's key goes there (not as a Bearer) unless the client
    # sent an OAuth Authorization; None: a Bearer, or `client_key` when the client used that
    key_header: bytes | None = None
    # a header a client may carry its key in instead of a Bearer: the proxy's key then goes there
    client_key: bytes | None = None
    # the query parameter a client may carry its key in (swapped for the proxy's, and scrubbed)
    key_query: str | None = None
    # the headers that carry a client's credentials: dropped when the proxy sends its own key,
    # and never written to a recording or a dump
    credentials: frozenset[bytes] = BEARER


def credential_headers(dialects: tuple[Dialect, ...]) -> frozenset[bytes]:
    """Every header any of these dialects carries a credential in."""
    return frozenset().union(*(d.credentials for d in dialects))


BARE = Dialect()  # a Bearer alone, and paths under the base URL: what a dialect says by default
