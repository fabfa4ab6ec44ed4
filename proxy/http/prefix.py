"""A session (and a trajectory) named in the base URL: /s/{session}/v1, /s/{session}/t/{name}/v1.

A runner that starts thousands of harnesses can often set nothing but a base URL per rollout. The
prefix keys the session exactly as `x-session-affinity` does (and names the trajectory as
`x-replay-trajectory` does), on every API path after it, and is taken off before routing and
forwarding. Both are checked as names (letters, digits and . _ : -), so a value can never change
the shape of a path the proxy builds from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from proxy.errors import BadRequest
from proxy.names import is_valid_name
from proxy.replay.conversation import session_problem

PREFIX = "/s/"


@dataclass(frozen=True, slots=True)
class Named:
    session: str
    trajectory: str | None
    path: str  # what follows the prefix, percent-decoded
    raw_path: bytes  # the same, as it came


def split(path: str, raw_path: bytes) -> Named:
    """The session (and trajectory) the path names, and the path after them. `path` starts with
    /s/. A raw path is split, not the decoded one: an encoded slash stays inside its segment."""
    parts = raw_path.split(b"/", 3)  # b"", b"s", session, rest
    if len(parts) < 4 or not parts[3]:
        raise _bad(path, "the session must be followed by the API's path, as in /s/{session}/v1")
    session = unquote(parts[2].decode("latin-1"))
    problem = session_problem(session)
    if problem is not None:
        raise _bad(path, f"the session in the path is {problem}")
    rest = b"/" + parts[3]
    trajectory = None
    if rest.startswith(b"/t/"):
        more = rest.split(b"/", 3)  # b"", b"t", name, rest
        if len(more) < 4 or not more[3]:
            raise _bad(
                path, "the trajectory must be followed by the API's path: /s/{s}/t/{name}/v1"
            )
        trajectory = _name(more[2], "trajectory", path)
        rest = b"/" + more[3]
    return Named(session, trajectory, unquote(rest.decode("latin-1")), rest)


def _name(raw: bytes, what: str, path: str) -> str:
    value = unquote(raw.decode("latin-1"))
    if not is_valid_name(value):
        raise _bad(
            path,
            f"the {what} in the path is {value[:80]!r}, which is not a valid {what} name "
            "(letters, digits and . _ : - only, at most 200)",
        )
    return value


def _bad(path: str, why: str) -> BadRequest:
    return BadRequest(f"{path[:120]}: {why}", param="path")
