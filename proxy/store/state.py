"""SessionState: everything the proxy knows about one session, small and serialisable."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class BoundBy(StrEnum):
    """How a session got its script (the glossary's binding): the status's `script.bound_by`,
    kept in the state's `script_source` (the name stored sessions already have)."""

    ADMIN = "admin"  # PUT /replay/sessions/{id}
    HEADER = "header"  # x-replay-trajectory
    TASK = "task"  # a loaded script with the same task
    UNCLAIMED = "unclaimed"  # the only script no session had claimed yet


@dataclass(slots=True)
class SessionState:
    id: str
    created: float
    last_seen: float
    # the script the session is bound to, and how it was chosen
    script_name: str | None = None
    script_digest: str | None = None
    script_source: str | None = None  # how it was chosen: a BoundBy
    task_match: bool | None = None
    turns_total: int = 0
    replay_turns: int | None = None  # a branch: only the first K turns are replayed, then live
    # what was served
    turns_served: int = 0  # the highest turn number served
    scripted_responses: int = 0  # scripted answers, counting a turn served again to a retry
    live_since: float | None = None
    live_reason: str | None = None  # "script used up" | "branch point reached" | "diverged"
    live_after_turn: int | None = None  # the scripted turns the first live request held
    divergence: dict[str, Any] | None = None  # the first divergence
    divergences: int = 0
    # --fail-on changed: volatile divergences served anyway, and the first of them
    volatile: dict[str, Any] | None = None
    volatile_served: int = 0
    preset: str | None = None  # the harness preset its requests were recognised by
    upstream: str | None = None  # where its live calls go, when --upstream depends on the session
    # scripted answers whose usage was as recorded, and those whose usage was estimated
    usage_recorded: int = 0
    usage_estimated: int = 0
    forwarded: dict[str, int] = field(default_factory=dict)  # lane -> requests sent upstream
    errors: int = 0
    # what came back: scripted call ids whose results the harness has sent
    results_returned: list[str] = field(default_factory=list)
    observation: dict[str, Any] | None = None  # the first tool result unlike the recorded one
    observation_diffs: int = 0
    results_checked: int = 0  # the scripted turns whose tool results have been compared
    # the restore verdict (proxy.replay.restore), settled when the replay ends; None: pending
    restore: dict[str, Any] | None = None
    # the replay ended after this many turns while replayed children were still running: the
    # verdict is settled when their lanes end (proxy.sessions.verdict)
    restore_due: int | None = None
    stops: int = 0  # final answers given by --after-script stop
    prefix_messages: int | None = None  # message count of the first live main-lane request
    recorded_used: list[str] = field(default_factory=list)  # strict: <digest>:<index> answered
    # faults (proxy.replay.faults): the session's own plan (admin API; None: the --fault plan),
    # how often each fault of the plan has fired, and each injection {"turn", "kind", "at"}
    faults: list[dict[str, Any]] | None = None
    faults_fired: list[int] = field(default_factory=list)
    injected: list[dict[str, Any]] = field(default_factory=list)
    # the subagents whose calls came in this session (proxy.lineage), the latest SUBAGENTS_KEPT:
    # {"child", "parent", "kind", "by", "requests", "first_seen", "last_seen"}
    subagents: list[dict[str, Any]] = field(default_factory=list)
    # the subagents replayed from the run's own children (proxy.sessions.children): the id the
    # harness gave each live child -> the recorded child's agent id it replays
    children: dict[str, str] = field(default_factory=dict)

    def copy(self) -> SessionState:
        """A copy whose containers are new too. Written out: it runs on every request, and
        __init__ costs twice as much (dataclasses.replace ten times); the store tests catch a
        field left out."""
        new = object.__new__(SessionState)
        new.id = self.id
        new.created = self.created
        new.last_seen = self.last_seen
        new.script_name = self.script_name
        new.script_digest = self.script_digest
        new.script_source = self.script_source
        new.task_match = self.task_match
        new.turns_total = self.turns_total
        new.replay_turns = self.replay_turns
        new.turns_served = self.turns_served
        new.scripted_responses = self.scripted_responses
        new.live_since = self.live_since
        new.live_reason = self.live_reason
        new.live_after_turn = self.live_after_turn
        new.divergence = self.divergence
        new.divergences = self.divergences
        new.volatile = self.volatile
        new.volatile_served = self.volatile_served
        new.preset = self.preset
        new.upstream = self.upstream
        new.usage_recorded = self.usage_recorded
        new.usage_estimated = self.usage_estimated
        new.forwarded = dict(self.forwarded)
        new.errors = self.errors
        new.results_returned = list(self.results_returned)
        new.observation = self.observation
        new.observation_diffs = self.observation_diffs
        new.results_checked = self.results_checked
        new.restore = self.restore  # replaced whole, never changed in place
        new.restore_due = self.restore_due
        new.stops = self.stops
        new.prefix_messages = self.prefix_messages
        new.recorded_used = list(self.recorded_used)
        new.faults = self.faults  # replaced whole, never changed in place
        new.faults_fired = list(self.faults_fired)
        new.injected = list(self.injected)
        new.subagents = [dict(a) for a in self.subagents]
        new.children = dict(self.children)
        return new

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        return cls(**data)

    def bind(
        self,
        *,
        name: str,
        digest: str,
        by: BoundBy,
        task_match: bool | None,
        turns: int,
        replay_turns: int | None,
    ) -> None:
        self.script_name = name
        self.script_digest = digest
        self.script_source = by
        self.task_match = task_match
        self.turns_total = turns
        self.replay_turns = replay_turns
        self.live_since = None
        self.live_reason = None
        self.live_after_turn = None
        self.divergence = None
        # what the replay of another script showed is not this one's (a script PUT again); the
        # counts are the session's history, and stay
        self.prefix_messages = None
        self.results_returned = []
        self.results_checked = 0
        self.observation = None
        self.recorded_used = []
        self.children = {}
        self.restore = None
        self.restore_due = None

    @property
    def turns_planned(self) -> int:
        """The turns this session replays: all of its script, or the first K of a branch."""
        if self.replay_turns is None:
            return self.turns_total
        return min(self.replay_turns, self.turns_total)


Change = Callable[[SessionState], None]

EVENTS_KEPT = 10_000  # the recent-events log holds this many, across all sessions

# One request as the status page shows it: {"at", "session", "lane", "source", "turn", "detail"}
Event = dict[str, Any]
# an event decided by the change: a function of the changed state (None: nothing to log)
EventOf = Callable[[SessionState], Event | None]


def event_for(event: Event | EventOf | None, state: SessionState) -> Event | None:
    return event(state) if callable(event) else event


def cursor_of(state: SessionState) -> str:
    """Where a page that ends with `state` stops, for stores that list by (created, id)."""
    return f"{state.created!r}:{state.id}"


def read_cursor(cursor: str) -> tuple[float, str]:
    created, sep, session = cursor.partition(":")
    try:
        when = float(created)
        if not sep or not math.isfinite(when):
            raise ValueError
        return when, session
    except ValueError:
        raise ValueError(f"{cursor[:80]!r} is not a cursor this store made") from None
