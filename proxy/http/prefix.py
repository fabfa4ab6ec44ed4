"""A session (and a trajectory, and its hand-off turn) named in the base URL: /s/{session}/v1,
/s/{session}/t/{name}/v1, /s/{session}/t/{name}/k/{K}/v1 (or /s/{session}/k/{K}/v1).

A runner that starts thousands of harnesses can often set nothing but a base URL per rollout. The
prefix keys the session exactly as `x-session-affinity` does (names the trajectory as
`x-replay-trajectory` does, and the turn it hands off after as `x-replay-turns` does: a crashed
rollout resumes at its own last durable turn), on every API path after it, and is taken off
before routing and forwarding. The names are checked as names (letters, digits and . _ : -) and K
as a number, so a value can never change the shape of a path the proxy builds from it.
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
    turns: int | None = None  # /k/{K}/: the session replays K turns, then goes live

    @property
    def chooses(self) -> bool:
        """It chooses or branches the session's script: privileged, as the headers that do."""
        return self.trajectory is not None or self.turns is not None


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
    turns = None
    if rest.startswith(b"/k/"):
        more = rest.split(b"/", 3)  # b"", b"k", K, rest
        if len(more) < 4 or not more[3]:
            raise _bad(path, "the turn must be followed by the API's path: /s/{s}/k/{K}/v1")
        turns = _turns(more[2], path)
        rest = b"/" + more[3]
    return Named(session, trajectory, unquote(rest.decode("latin-1")), rest, turns)


def _turns(raw: bytes, path: str) -> int:
    if not raw.isdigit() or len(raw) > 9:
        raise _bad(
            path,
            f"the turn in the path is {raw[:20].decode('latin-1')!r}: /k/{{K}}/ takes the number "
            "of scripted turns to replay before going live (0 or more)",
        )
    return int(raw)


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
