"""The contract of a harness-log format: tell its shape apart, and turn it into chat messages.

A Reader reads either one JSON document (`lines=False`: the parsed value) or a JSONL file
(`lines=True`: a list of (line index, parsed value), blank lines left out). `miss` says cheaply
whether a file is of its format, looking only at what tells the format apart; when it is not, it
says why, with where (a line or a JSON path), and how close the file came, so that an unknown file
gets one error naming the closest format. `convert` turns the file into one or more conversations
of OpenAI chat messages (the canonical form), each message remembering where it came from; what
it leaves out of the main script (subagent sidechains, summaries, snapshots) is reported as
notes. The chat loader then applies the script rules, the same for every format.

A format whose turns carry more than chat messages (a recording: each turn's recorded exchange,
the exchanges of the other lanes) builds its trajectories itself instead (`build`), from the
file and what the loader knows of it (`Opened`); it is told apart and tried like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.apis import Api
from proxy.replay.trajectory import Note, Trajectory

Lines = list[tuple[int, Any]]  # (0-based line index, parsed value) of a JSONL file


@dataclass(slots=True)
class Converted:
    """One conversation read from a harness's log."""

    messages: list[dict[str, Any]]  # OpenAI chat messages
    indexes: list[int]  # per message: the line (JSONL) or item index it came from
    left_out: list[Note] = field(default_factory=list)  # not in the main script, and why
    label: str | None = None  # for a file of several trajectories: this one's (e.g. its line)
    system: str | None = None  # a system prompt kept beside the messages, if the log has one
    places: dict[int, str] | None = None  # per index, its place in the file if "line N" is not it
    refused: str | None = None  # this conversation could not be read, and why (no messages then)
    # a reader of several formats (a bare list of any API's messages): this one's, and how its
    # places are named ("message": its place among the file's values, for a JSONL of them)
    format: str | None = None
    unit: str | None = None


@dataclass(frozen=True, slots=True)
class Misfit:
    """Why a file is not of a format, and how close it came (the count of the format's marks it
    has: 0 for none). The closest format's reason is the one an unknown file's error leads with."""

    reason: str
    closeness: int = 0


@dataclass(frozen=True, slots=True)
class Opened:
    """What the loader knows of a file beside its content: what to name its trajectories, where
    it was read from, its digest, what it left out already (a JSONL's cut last line), and the
    APIs a recording's exchanges may have been made in, by name."""

    name: str
    filename: str
    digest: str
    notes: list[Note]
    apis: Mapping[str, Api]


@dataclass(frozen=True, slots=True)
class Reader:
    name: str  # as `check` and `convert` report it, e.g. "claude-code"
    lines: bool  # True: JSONL; False: one JSON document
    miss: Callable[[Any], Misfit | None]  # None: the file is of this format
    # (doc or lines, filename) -> its conversations as chat messages; raises LoadError
    convert: Callable[[Any, str], list[Converted]] | None
    # or its trajectories whole, for a format whose turns carry more than messages
    build: Callable[[Any, Opened], list[Trajectory]] | None = None

    def __post_init__(self) -> None:
        if (self.convert is None) is (self.build is None):
            raise TypeError(f"reader {self.name!r}: give it convert or build, one of the two")


class Script:
    """A conversation as a reader puts it together: chat messages, the index each came from, and
    notes on what was left out. The readers that build one message at a time extend it."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.indexes: list[int] = []
        self.notes: list[Note] = []

    def add(self, message: dict[str, Any], index: int) -> None:
        self.messages.append(message)
        self.indexes.append(index)

    def note(self, index: int, reason: str) -> None:
        self.notes.append(Note(index, reason))

    def converted(self, **more: Any) -> Converted:
        """What was read, as the loader takes it."""
        return Converted(self.messages, self.indexes, self.notes, **more)
