"""An upstream per session: {session} and {trajectory} in --upstream's path or query, and in
--upstream-header values, filled in for each request that goes live.

A training pipeline's policy gateway keys each rollout's calls by an id of its own (rLLM:
/sessions/{sid}/v1; others a header or a query parameter), so a session's upstream is its own:
- every value is a name (letters, digits and . _ : -, never "." or ".."), checked as it fills
  the template, and percent-encoded into the URL: it cannot add a path segment, climb out of
  one, add a query parameter or a header line;
- the origin (scheme, host, port) never holds a field: a session cannot send a request elsewhere;
- a client's query may not name a parameter the template's query sets (a gateway that reads the
  last `sid=` would take the client's), and no path with a "." or ".." segment goes upstream
  (a gateway that resolves them would take the call out of the session's base path).
The start-up checks' messages name the value, not the flag: serve.py puts the flag (or the
environment variable) before them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, unquote_plus, urlsplit

from proxy.errors import BadRequest
from proxy.names import is_valid_name

# the session and its script's name; where a resumed session was handed off to the live model, and
# its restore verdict (proxy.replay.restore; empty before and without a hand-off)
FIELDS = ("session", "trajectory", "handoff_turn", "restore")
HANDOFF_HEADERS = (("x-replay-handoff-turn", "handoff_turn"), ("x-replay-restore", "restore"))
_FIELD = re.compile(r"\{([^{}]*)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_UNSAFE_VALUE = re.compile(r"[\x00-\x1f\x7f]")
# a "." or ".." segment, between slashes (or backslashes, which WHATWG parsers take for one) or at
# an end; "..;x" too, as Tomcat-style servers drop ";x" before they resolve the segment
_DOT_SEGMENT = re.compile(r"(?:^|[/\\])\.\.?(?:;[^/\\]*)?(?=[/\\]|$)")
_DECODES = 3  # a gateway behind another proxy may decode a path twice; a third for good measure
_SEPARATOR = re.compile(r"[&;]")  # ";" separates parameters for some servers too


def fields(text: str) -> set[str]:
    return set(_FIELD.findall(text))


def check(text: str, where: str) -> None:
    """Only {session} and {trajectory}, and no brace left over. `where` names the text (not the
    flag, which the caller's report puts first)."""
    unknown = fields(text) - set(FIELDS)
    named = ", ".join(f"{{{f}}}" for f in FIELDS)
    if unknown:
        raise ValueError(
            f"{where}: {{{sorted(unknown)[0]}}} is not a field; the fields are {named}"
        )
    if "{" in _FIELD.sub("", text) or "}" in _FIELD.sub("", text):
        raise ValueError(f"{where}: a brace that opens no field ({named})")


def check_url(url: str) -> None:
    check(url, repr(url))
    parts = urlsplit(url)
    if fields(parts.netloc) or "{" in parts.scheme:
        raise ValueError(
            f"{url!r}: fields like {{session}} may stand in its path or query only, never in its "
            "host: a session must not choose where its calls go"
        )


def parse_header(spec: str) -> tuple[str, str]:
    """'Name: value with {session}' -> (name in lower case, value template)."""
    name, colon, value = spec.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"{spec!r}: expected 'Name: value'")
    if _UNSAFE_VALUE.search(value):
        raise ValueError(f"{spec!r}: the value holds a control character")
    check(value, repr(spec))
    return name.lower(), value


def fill(text: str, values: Mapping[str, str], *, encode: bool) -> str:
    """The template with each field's value, percent-encoded (every byte but letters, digits and
    - . _ ~) for a URL. Each value is checked here, so that no caller can forget it: a name
    (proxy.names), or empty (no value: the field fills in empty). Percent-encoding alone would
    let ".." through (dots are unreserved), and a header value has no encoding at all."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = values.get(name, "")
        if found and not is_valid_name(found):
            raise BadRequest(
                f"the {name} {found[:80]!r} cannot fill {{{name}}} in the upstream's URL or "
                f"headers (--upstream, --upstream-header): a {name} must be a name, letters, "
                "digits and . _ : - only, at most 200, never '.' or '..'",
                param=name,
            )
        return quote(found, safe="") if encode else found

    return _FIELD.sub(value, text)


def dot_segment(path: str) -> bool:
    """The path holds a "." or ".." segment, as sent or once decoded (up to _DECODES times: %2e,
    %2E, and %2F for the slashes around one). The proxy forwards a path as it came, and a server
    that resolves it would climb out of the base path it is put under. A path with no dot and no
    percent sign (the usual one) is told apart at once."""
    if "." not in path and "%" not in path:
        return False
    for _ in range(_DECODES):
        if _DOT_SEGMENT.search(path):
            return True
        if "%" not in path:
            return False
        path = unquote(path, encoding="latin-1")  # byte for byte: any byte may be a separator
    return _DOT_SEGMENT.search(path) is not None


def refuse_dot_segments(path: str) -> None:
    if dot_segment(path):
        raise BadRequest(
            f"the path {path[:200]!r} holds a '.' or '..' segment (as sent or percent-encoded): "
            "the proxy forwards a path as it comes, and a server that resolves such a segment "
            "would take the request out of the upstream's base path; send the path without it",
            param="path",
        )


def _names(query: str) -> dict[str, str]:
    """The query's parameter names as a server reads them (decoded, in lower case, as some read
    them), each with the name as written."""
    found: dict[str, str] = {}
    for part in _SEPARATOR.split(query):
        written = part.partition("=")[0]
        if written:
            found.setdefault(unquote_plus(written, encoding="latin-1").lower(), written)
    return found


@dataclass(frozen=True, slots=True)
class Target:
    """The per-session parts of the upstream: the base path and query, and extra headers."""

    path: str  # the base path as written, percent-encoded, with fields
    query: str
    headers: tuple[tuple[str, str], ...] = ()
    params: frozenset[str] = field(init=False)  # the parameters the query sets: the proxy's own

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", frozenset(_names(self.query)))

    def base(self, values: Mapping[str, str]) -> tuple[str, str]:
        """(the base path, the base query) for these values."""
        return fill(self.path, values, encode=True), fill(self.query, values, encode=True)

    def header_lines(self, values: Mapping[str, str]) -> list[tuple[str, str]]:
        return [(name, fill(value, values, encode=False)) for name, value in self.headers]

    def own(self, query: str) -> None:
        """Refuse a client's query that names a parameter the template sets: appended after the
        template's, it would override it at a gateway that reads the last one, and dropping it
        would change the request unsaid."""
        if not self.params or not query:
            return
        for name, written in _names(query).items():
            if name in self.params:
                decoded = unquote_plus(written, encoding="latin-1")
                raise BadRequest(
                    f"the query parameter {decoded!r} is set by the proxy for each session (in "
                    "--upstream's query); a client may not set it, as it would name another "
                    "session's place at the upstream",
                    param=decoded,
                )
