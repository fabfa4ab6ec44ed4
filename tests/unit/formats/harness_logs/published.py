"""The harness logs' real published files (tests/fixtures/harness_logs, each folder's README says where
they come from) and how a test reads one: as its reader takes it, changed, and read back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from proxy.formats import read_with
from proxy.formats.harness_logs import (
    Reader,
    claude_code,
    codex,
    mini_swe_agent,
    nemo_gym,
    opencode,
    openhands,
    swe_agent,
)
from proxy.replay.trajectory import Trajectory
from tests.conftest import ROOT

LOGS = ROOT / "tests/fixtures/harness_logs"

# every reader's published files, as paths under LOGS (an OpenHands SDK event store is a folder)
PUBLISHED: list[tuple[Reader, str]] = [
    (claude_code.READER, "claude-code/session.jsonl"),
    (claude_code.READER, "claude-code/subagent.jsonl"),
    (claude_code.READER, "claude-code/v1-session.jsonl"),
    (claude_code.READER, "claude-code/e2e-replay.jsonl"),
    (codex.READER, "codex/rollout.jsonl"),
    (codex.READER, "codex/subagent.jsonl"),
    (codex.READER, "codex/v0.20-rollout.jsonl"),
    (codex.READER, "codex/e2e-replay.jsonl"),
    (opencode.READER, "opencode/session.json"),
    (opencode.READER, "opencode/subagent.json"),
    (opencode.READER, "opencode/e2e-replay.json"),
    (openhands.READER, "openhands/sdk-conversation"),
    (openhands.READER, "openhands/v0-basic_gui_mode.json"),
    (openhands.READER, "openhands/v0-basic_interactions.json"),
    (swe_agent.READER, "swe-agent/function-calling.traj"),
    (swe_agent.READER, "swe-agent/text-demo.traj"),
    (mini_swe_agent.READER, "mini-swe-agent/toolcall.traj.json"),
    (mini_swe_agent.READER, "mini-swe-agent/textbased.traj.json"),
    (mini_swe_agent.READER, "mini-swe-agent/responses.traj.json"),
    (mini_swe_agent.READER, "mini-swe-agent/v1.traj.json"),
    (mini_swe_agent.READER, "mini-swe-agent/v1-openrouter.traj.json"),
    (mini_swe_agent.READER, "mini-swe-agent/e2e-replay.traj.json"),
    (nemo_gym.READER, "nemo-gym/xlam_fc.jsonl"),
    (nemo_gym.READER, "nemo-gym/blackjack.jsonl"),
    (nemo_gym.READER, "nemo-gym/google_search-line1.jsonl"),
]

Change = Callable[[Any], None]  # changes a file's JSON (see `values`) in place


def values(path: str) -> Any:
    """The JSON of a published file: a JSONL file's values, one a line; an event store's events,
    in name order (as the loader hands them over); else the one document."""
    file = LOGS / path
    if file.is_dir():
        return [json.loads(p.read_text()) for p in sorted((file / "events").glob("event-*.json"))]
    if file.name.endswith(".jsonl"):
        return [json.loads(line) for line in file.read_text().splitlines()]
    return json.loads(file.read_text())


def parsed(reader: Reader, path: str) -> Any:
    """A published file as `reader` takes it: (line index, value) pairs, or the document."""
    if reader.lines:
        text = (LOGS / path).read_text().splitlines()
        return [(i, json.loads(line)) for i, line in enumerate(text) if line.strip()]
    return values(path)


def raw(path: str) -> bytes:
    """The bytes of a published file (an event store's events, as one JSON list)."""
    file = LOGS / path
    return json.dumps(values(path)).encode() if file.is_dir() else file.read_bytes()


def encoded(reader: Reader, value: Any) -> bytes:
    """A file's JSON (see `values`) written back as `reader` reads it."""
    if reader.lines:
        return "".join(json.dumps(v) + "\n" for v in value).encode()
    return json.dumps(value).encode()


def edited(reader: Reader, path: str, change: Change) -> bytes:
    """A published file with its JSON changed by `change`."""
    value = values(path)
    change(value)
    return encoded(reader, value)


def read_all(reader: Reader, data: bytes, name: str = "run") -> list[Trajectory]:
    source = f"{name}.jsonl" if reader.lines else f"{name}.json"
    return read_with(reader, data, name=name, filename=source)


def read(reader: Reader, data: bytes, name: str = "run") -> Trajectory:
    [t] = read_all(reader, data, name)
    return t


def calls(t: Trajectory) -> list[list[str]]:
    return [[c.id for c in turn.tool_calls] for turn in t.turns]


def notes(t: Trajectory) -> dict[int, str]:
    return {n.index: n.reason for n in t.skipped}


def put(path: tuple[Any, ...], value: Any) -> Change:
    """A change: the value at `path` (keys and indexes into the file's JSON) becomes `value`."""

    def change(document: Any) -> None:
        *to, last = path
        _at(document, to)[last] = value

    return change


def drop(path: tuple[Any, ...]) -> Change:
    """A change: the key (or item) at `path` is taken out."""

    def change(document: Any) -> None:
        *to, last = path
        del _at(document, to)[last]

    return change


def _at(document: Any, path: list[Any]) -> Any:
    for key in path:
        document = document[key]
    return document
