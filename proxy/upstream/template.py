"""An upstream per session: {session} and {trajectory} in --upstream's path or query, and in
--upstream-header values, filled in for each request that goes live.

A training pipeline's policy gateway keys each rollout's calls by an id of its own (rLLM:
/sessions/{sid}/v1; others a header or a query parameter). The values are percent-encoded into
the URL (a session id cannot add a path segment, a query parameter or a header line), and the
origin (scheme, host, port) never holds one: a session cannot send a request elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

FIELDS = ("session", "trajectory")
_FIELD = re.compile(r"\{([^{}]*)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_UNSAFE_VALUE = re.compile(r"[\x00-\x1f\x7f]")


def fields(text: str) -> set[str]:
    return set(_FIELD.findall(text))


def check(text: str, where: str) -> None:
    """Only {session} and {trajectory}, and no brace left over."""
    unknown = fields(text) - set(FIELDS)
    if unknown:
        raise ValueError(
            f"{where}: {{{sorted(unknown)[0]}}} is not a field; the fields are {{session}} and "
            "{trajectory}"
        )
    if "{" in _FIELD.sub("", text) or "}" in _FIELD.sub("", text):
        raise ValueError(f"{where}: a brace that opens no field ({{session}}, {{trajectory}})")


def check_url(url: str) -> None:
    check(url, "--upstream")
    parts = urlsplit(url)
    if fields(parts.netloc) or "{" in parts.scheme:
        raise ValueError(
            f"--upstream {url!r}: {{session}} and {{trajectory}} may stand in its path or query "
            "only, never in its host: a session must not choose where its calls go"
        )


def parse_header(spec: str) -> tuple[str, str]:
    """'Name: value with {session}' -> (name in lower case, value template)."""
    name, colon, value = spec.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"--upstream-header {spec!r}: expected 'Name: value'")
    if _UNSAFE_VALUE.search(value):
        raise ValueError(f"--upstream-header {spec!r}: the value holds a control character")
    check(value, f"--upstream-header {name}")
    return name.lower(), value


def fill(text: str, values: Mapping[str, str], *, encode: bool) -> str:
    """The template with each field's value, percent-encoded (every byte but letters, digits and
    - . _ ~) for a URL; for a header the values are names already checked (no control character,
    no separator)."""

    def value(match: re.Match[str]) -> str:
        found = values.get(match.group(1), "")
        return quote(found, safe="") if encode else _UNSAFE_VALUE.sub("", found)

    return _FIELD.sub(value, text)


@dataclass(frozen=True, slots=True)
class Target:
    """The per-session parts of the upstream: the base path and query, and extra headers."""

    path: str  # the base path as written, percent-encoded, with fields
    query: str
    headers: tuple[tuple[str, str], ...] = ()

    def base(self, values: Mapping[str, str]) -> tuple[str, str]:
        """(the base path, the base query) for these values."""
        return fill(self.path, values, encode=True), fill(self.query, values, encode=True)

    def header_lines(self, values: Mapping[str, str]) -> list[tuple[str, str]]:
        return [(name, fill(value, values, encode=False)) for name, value in self.headers]
