"""The one internal model of a saved run: a Trajectory is a task plus a script of Turns.

The script is one or more rounds: each runs from a user prompt (the task, then each follow-up
the user typed after an answer) to a text-only final answer. A script with no tool call at all is
text-based: one round whose user messages between turns are the harness's observations.

Every loader produces this, whatever the input format; the engine and the renderers read only this.
Treat all of it as read-only. Only Trajectory is frozen: a large file makes tens of thousands of
the parts, and a frozen dataclass takes three times as long to build.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.replay.tokens import Tokens

# the key of a chat-form tool call that holds what the API it was recorded in needs to dispatch
# it: {"responses": {"namespace": "multi_agent_v1"}}; readers put it there, the chat loader reads it
DISPATCH = "dispatch"
# the fields of a recorded call that its harness may need to dispatch it are each API's to name
# (its history module in proxy.apis): served as recorded when the call is served over that API,
# and left out over any other


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, kept verbatim from the recording
    # API name -> the call's fields that API's harness dispatches it by (dispatch_of), as
    # recorded; None: nothing beyond id, name and arguments
    dispatch: Mapping[str, Mapping[str, Any]] | None = None

    def served_with(self, api: str) -> Mapping[str, Any]:
        """The recorded fields that go into this call's item when it is served over `api`."""
        return (self.dispatch or {}).get(api) or {}


def dispatch_of(
    api: str, names: tuple[str, ...], item: Mapping[str, Any]
) -> dict[str, dict[str, Any]] | None:
    """What of a recorded call item of `api` is kept for serving it (the fields `names`, the
    API's own), in a chat-form call's DISPATCH shape; None when it carries none of them."""
    fields = {k: item[k] for k in names if item.get(k) is not None}
    return {api: fields} if fields else None


def not_served(call: ToolCall) -> list[tuple[str, str, Any]]:
    """(api, field, value) of each recorded dispatch field: served over its own API only."""
    return [
        (api, name, value)
        for api, fields in (call.dispatch or {}).items()
        for name, value in fields.items()
    ]


@dataclass(slots=True)
class UserMessage:
    """A user message that came after the task; it is spliced into live requests."""

    index: int  # position in the source file
    content: str | list[Any]  # as recorded: a string or a list of content parts


@dataclass(slots=True)
class Recorded:
    """One exchange of a recording, kept whole for strict replay."""

    index: int  # line index in the recording
    api: str  # its Api row's name (chat, responses, anthropic, ...), or other
    lane: str
    method: str
    path: str
    request: Any  # the body the client sent
    status: int
    stream: bool
    content_type: str
    body: bytes  # the answer exactly as it was sent: a JSON body or the SSE events
    preset: str | None = None  # the harness preset it was recorded with (proxy.replay.presets)


@dataclass(slots=True)
class Usage:
    """Tokens a model call cost (proxy.replay.usage reads and estimates them). Read-only once
    made; not frozen, as one is made per scripted answer when it is estimated."""

    input: int  # every input token, cached or not
    output: int  # every output token, reasoning included
    cached: int = 0  # input tokens read from a cache
    cache_write: int = 0  # input tokens written to a cache (Anthropic)
    reasoning: int = 0  # output tokens spent reasoning
    estimated: bool = False  # nothing was recorded: about 4 characters a token


@dataclass(slots=True)
class Turn:
    number: int  # 1-based position in the script
    index: int  # position of the assistant message in the source file
    text: str
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    users_before: tuple[UserMessage, ...] = ()  # later user messages this turn answered
    recorded: Recorded | None = None  # the exchange that produced it, when from a recording
    round: int = 1  # which round of the conversation (a user prompt -> the final answer) it is in
    # the user messages that opened this turn's round after the previous one's final answer:
    # the harness sends these itself, so they are compared with the request, never spliced
    follow_up: tuple[UserMessage, ...] = ()
    usage: Usage | None = None  # what the recorded model call cost, when the file says
    created: int | None = None  # when it was answered (epoch seconds), when the file says
    tokens: Tokens | None = None  # the call's token ids and log-probabilities, when recorded

    def served(self, usage: Usage, created: int) -> Turn:
        """This turn as one answer serves it: with its usage and time settled. Positional: it
        runs on every scripted answer, and dataclasses.replace costs three times as much."""
        return Turn(
            self.number, self.index, self.text, self.reasoning, self.tool_calls,
            self.users_before, self.recorded, self.round, self.follow_up, usage, created,
            self.tokens,
        )  # fmt: skip

    @property
    def final(self) -> bool:
        """A text-only turn ends the agent loop: it is served with finish_reason "stop"."""
        return not self.tool_calls


@dataclass(slots=True)
class Note:
    """Something in the file that is not replayed, and why."""

    index: int
    reason: str
    where: str | None = None  # its place, when it is not a message of the trajectory (a line)


def place_of(index: int, places: Mapping[int, str] | None, unit: str) -> str:
    """A message's place as the file numbers it: a reader's own name for it, or its line (1-based,
    as editors count) or its message index."""
    if places and index in places:
        return places[index]
    return f"line {index + 1}" if unit == "line" else f"{unit} {index}"


def child_name(parent: str, agent: str) -> str:
    """The name a run's child is found by (proxy.sessions.library), and its lane's session id is
    made from: `<run>:agent-<agent id>`."""
    return f"{parent}:agent-{agent}"


def parent_of(name: str) -> tuple[str, str] | None:
    """(the run's name, the agent id) of a child's name; None for any other name."""
    parent, mark, agent = name.rpartition(":agent-")
    return (parent, agent) if mark and parent and agent else None


@dataclass(frozen=True, slots=True)
class Child:
    """A subagent the run spawned, with its own recorded conversation: its calls replay as a lane
    of their own (proxy.sessions.children), never as the main lane's turns."""

    agent: str  # the id the harness gave it in the recorded run (a name: letters, digits, - _)
    trajectory: Trajectory  # its own conversation, read from its own transcript
    spawned_by: str | None = None  # the id of the main lane's tool call that spawned it
    kind: str | None = None  # what kind of agent, when the harness says (Claude Code's agentType)
    # the spawning call's output only names the child (Codex's spawn_agent: the new thread's id
    # and a nickname, new on every run): that call is checked by a live child taking the child's
    # task, not by its text (proxy.replay.engine.observe, proxy.replay.restore)
    named_only: bool = False

    @property
    def task(self) -> str | None:
        """What it was asked: its first user message (the spawning call's prompt)."""
        return self.trajectory.task


@dataclass(frozen=True, slots=True)
class Trajectory:
    name: str
    filename: str  # the file it came from, or "admin:<session>"
    format: str
    digest: str  # sha256 of the source bytes: identifies the script across workers
    task: str | None
    system: str | None
    turns: tuple[Turn, ...]
    trailing_users: tuple[UserMessage, ...] = ()  # user messages after the last turn
    tool_outputs: Mapping[str, str] = field(default_factory=dict)  # call id -> recorded output
    skipped: tuple[Note, ...] = ()
    dropped: tuple[Note, ...] = ()
    side: tuple[Recorded, ...] = ()  # a recording's exchanges outside the main lane
    # where an index points in the file, for notes: "line 3, response.output[4]" (the readers of
    # files that hold several items per line give them); otherwise "<unit> <index>"
    places: Mapping[int, str] = field(default_factory=dict)
    unit: str = "message"  # "line": the indexes are 0-based lines of a JSONL file
    children: tuple[Child, ...] = ()  # the subagents it spawned, from their own transcripts
    read: int = 0  # messages read from the file (what dropped notes are a share of)
    # no turn calls a tool: the harness calls its tools through text, and the user messages
    # between turns are its observations (proxy.replay.text_based); read on every request
    text_based: bool = field(init=False)
    tokened: bool = field(init=False)  # a turn recorded token ids or logprobs (proxy.replay.tokens)

    def __post_init__(self) -> None:
        text_based = bool(self.turns) and not any(t.tool_calls for t in self.turns)
        object.__setattr__(self, "text_based", text_based)
        object.__setattr__(self, "tokened", any(t.tokens is not None for t in self.turns))

    def tokens_upstream(self, token_in: bool) -> bool:
        """Whether a live request's history may keep the token fields a client sends back: when
        the script served none (they are the client's own), or the upstream takes token ids
        (--handoff-tokens). Else they are taken out: a plain API may refuse a field it does not
        know, in a message or an item."""
        return token_in or not self.tokened

    @property
    def spawns_named_only(self) -> frozenset[str]:
        """The calls whose output only names the child they spawned (Child.named_only)."""
        return frozenset(c.spawned_by for c in self.children if c.named_only and c.spawned_by)

    def prefix_tokens(self, held: int) -> list[int] | None:
        """What a session's first live call continues from (--handoff-tokens): the recorded
        prompt and generation ids of the last of the `held` replayed turns; None when that turn
        recorded no both."""
        if not 0 < held <= len(self.turns):
            return None
        tokens = self.turns[held - 1].tokens
        return tokens.prefix() if tokens is not None else None

    def child(self, agent: str) -> Child | None:
        return next((c for c in self.children if c.agent == agent), None)

    def place(self, index: int) -> str:
        """Where message `index` is in the file, in the file's own numbering."""
        return place_of(index, self.places, self.unit)

    @property
    def tool_call_count(self) -> int:
        return sum(len(t.tool_calls) for t in self.turns)

    @property
    def rounds(self) -> int:
        return self.turns[-1].round if self.turns else 0

    def summary(self) -> dict[str, Any]:
        """What `check` prints and the status page shows about the script."""
        return {
            "name": self.name,
            "filename": self.filename,
            "format": self.format,
            "task": self.task,
            "text_based": self.text_based,
            "rounds": self.rounds,
            "turns": [
                {
                    "turn": t.number,
                    "round": t.round,
                    "index": t.index,
                    "where": self.place(t.index),
                    "text": t.text,
                    "reasoning": t.reasoning is not None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "name": c.name,
                            "arguments": c.arguments,
                            **({DISPATCH: c.dispatch} if c.dispatch else {}),
                        }
                        for c in t.tool_calls
                    ],
                    "final": t.final,
                    "tokens": None
                    if t.tokens is None
                    else {
                        "style": t.tokens.style,
                        "generated": len(t.tokens.generation or ()),
                        "prompt": len(t.tokens.prompt or ()),
                        "logprobs": t.tokens.generation_log_probs() is not None
                        or t.tokens.entries is not None,
                    },
                    "users_before": [u.index for u in t.users_before],
                    "follow_up": [u.index for u in t.follow_up],
                }
                for t in self.turns
            ],
            "trailing_users": [u.index for u in self.trailing_users],
            "children": [
                {
                    "agent": c.agent,
                    "spawned_by": c.spawned_by,
                    "kind": c.kind,
                    "filename": c.trajectory.filename,
                    "turns": len(c.trajectory.turns),
                    "task": c.task,
                }
                for c in self.children
            ],
            "skipped": [self._note(n) for n in self.skipped],
            "dropped": [self._note(n) for n in self.dropped],
        }

    def _note(self, note: Note) -> dict[str, Any]:
        return {"index": note.index, "where": self.place_of_note(note), "reason": note.reason}

    def place_of_note(self, note: Note) -> str:
        return note.where or self.place(note.index)
