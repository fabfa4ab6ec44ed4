"""What the engine needs to know about one incoming request, whatever API it came through.

Parsers (proxy.apis) build a Conversation from a request body without validating the whole
message list: only the fields the decision reads, each with the JSON path it came from so a
divergence can point at it.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from proxy.errors import BadRequest
from proxy.names import is_valid_name
from proxy.replay.ids import as_recorded

NOOP_TOOL = "_noop"  # compaction calls carry this stub tool: it counts as no tools
# the id of a call sent without one (the Gemini API does not require ids), followed by its place:
# the engine matches such a call by name, and its result by the same stand-in
NO_ID = "#no-id:"
FINGERPRINT = "fp-"  # the session of a client that sends no session id: never claimed by one


class Lane(StrEnum):
    MAIN = "main"  # the agent loop: tool-bearing calls of a top-level session
    TOOLLESS = "toolless"  # title, summary, compaction, commit-message side calls
    SUBAGENT = "subagent"  # calls that carry the subagent (parent session) header
    OTHER = "other"  # the other endpoints (proxy.http.forward): not a conversation


CONVERSATION_LANES = tuple(lane for lane in Lane if lane is not Lane.OTHER)
"""The lanes a completion request can be in (Conversation.lane)."""


Where = tuple[str | int, ...]
"""A JSON path kept as its parts, written out by path_of only when a report needs it: most
requests never diverge, and formatting a path per message cost as much as the rest of the parse.
("messages", 3, "tool_calls", 0, "id") is messages[3].tool_calls[0].id; a part that starts with
"[" is written as it is ("input", "[3:]" is input[3:])."""


def path_of(where: Where) -> str:
    parts: list[str] = []
    for part in where:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif parts and not part.startswith("["):
            parts.append(f".{part}")
        else:
            parts.append(part)
    return "".join(parts)


@dataclass(slots=True)
class Call:
    id: str
    name: str
    arguments: str
    id_path: Where  # of the id, e.g. messages[3].tool_calls[0].id
    name_path: Where


@dataclass(slots=True)
class Reply:
    """An assistant message in the request history."""

    position: int  # index in the request's message list
    path: Where  # of the message, e.g. messages[3]
    text: str
    calls: list[Call]
    calls_path: Where  # of the tool-call list, e.g. messages[3].tool_calls
    end: int  # index of its last message or item (Responses spreads a reply over items)


@dataclass(slots=True)
class Result:
    """A tool result in the request history."""

    position: int  # index of the message (or item) that holds it
    output_path: Where  # of the output, e.g. messages[4].content
    call_id: str
    output: str


@dataclass(slots=True)
class Conversation:
    api: str
    model: str
    stream: bool
    include_usage: bool
    tools: tuple[str, ...]  # names of the tools offered
    tool_choice_none: bool
    message_count: int
    # filled in by the parser as it reads the history
    system: str = ""
    task: str | None = None  # the first user message
    replies: list[Reply] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    users: dict[int, str] = field(default_factory=dict)  # position -> text, in position order
    array: bool = False  # Gemini's streamGenerateContent without alt=sse: chunks as a JSON array
    # the id the client is shown for a recorded call id: its API's rule (Anthropic's takes fewer)
    wire_id: Callable[[str], str] = as_recorded
    # the positions of `users` in order, made on the first users_between (the parser is done by
    # then): the follow-ups and the splice of one request each look at many ranges of them
    _user_positions: list[int] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def takes_tools(self) -> bool:
        """Only a request that lets the model call a tool may take a scripted turn."""
        if self.tool_choice_none or not self.tools:
            return False
        # read per request more than once: the first name settles it unless it is the stub
        return self.tools[0] != NOOP_TOOL or self.tools.count(NOOP_TOOL) < len(self.tools)

    def users_between(self, start: int, end: int) -> list[tuple[int, str]]:
        """The user messages after position `start` and before `end`, in order, as (position,
        text): found by bisection, since a request asks this once per scripted turn."""
        positions = self._user_positions
        if positions is None or len(positions) != len(self.users):
            positions = self._user_positions = sorted(self.users)
        lo = bisect_right(positions, start)
        hi = bisect_left(positions, end, lo)
        users = self.users
        return [(pos, users[pos]) for pos in positions[lo:hi]]

    def lane(self, *, subagent: bool) -> Lane:
        if subagent:
            return Lane.SUBAGENT
        return Lane.MAIN if self.takes_tools else Lane.TOOLLESS

    def fingerprint(self) -> str:
        """A session key for clients that send no session header: the system prompt and task."""
        digest = hashlib.sha256(f"{self.system}\x00{self.task or ''}".encode()).hexdigest()
        return FINGERPRINT + digest[:24]


def fold_greeting(conv: Conversation) -> Conversation:
    """Assistant text before the task (before the first user message and any tool call: a
    greeting the environment put in the prompt) is prompt, compared like the system prompt, not
    an answer of the script; and a request whose agent called a tool before any user message has
    no task. The loader reads a file the same way (formats/chat.py)."""
    if conv.task is None or not conv.replies:
        return conv
    first_user = next(iter(conv.users))  # filled in message order
    k = 0
    for reply in conv.replies:
        if reply.position > first_user or reply.calls:
            break
        k += 1
    if k < len(conv.replies) and conv.replies[k].position < first_user:
        conv.task = None  # the agent acted before any user line: no task, as the loader reads it
        return conv
    if k:
        greeting = [r.text for r in conv.replies[:k]]
        conv.system = "\n".join([conv.system, *greeting] if conv.system else greeting)
        del conv.replies[:k]
    return conv


def session_header(headers: Mapping[str, str], names: Sequence[str]) -> str | None:
    """The first session header present (a session id becomes a file name: checked), or None."""
    for name in names:
        value = headers.get(name)
        if value:
            problem = session_problem(value)
            if problem is not None:
                raise BadRequest(f"the session header {name} holds {problem}", param=name)
            return value
    return None


def session_problem(value: str) -> str | None:
    """Why a session id a client sends (a header, the path) cannot be used, or None: it must be
    a name, and not one of the proxy's fingerprints, which name the sessions of clients that send
    no session header (another client must not step into them)."""
    if not is_valid_name(value):
        return (
            f"{value[:80]!r}, which is not a valid session id (letters, digits and . _ : - only, "
            "at most 200)"
        )
    if value.startswith(FINGERPRINT):
        return (
            f"{value[:80]!r}: ids starting with {FINGERPRINT!r} are the proxy's own, a "
            "fingerprint of a conversation sent without a session id; choose another id"
        )
    return None


def session_id(headers: Mapping[str, str], names: Sequence[str], conv: Conversation) -> str:
    """The first session header present, else a fingerprint of the conversation."""
    return session_header(headers, names) or conv.fingerprint()
