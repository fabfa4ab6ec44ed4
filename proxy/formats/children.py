"""The subagents a run spawned, read from the transcripts the harness keeps of each beside the run's
own log, so that a resumed run's children replay what they did, not a live model.

Claude Code 2.1.x writes each child of session `<id>` to `<project>/<id>/subagents/agent-<agent
id>.jsonl` (every line `isSidechain: true`), with `agent-<agent id>.meta.json` beside it naming the
tool call that spawned it (`toolUseId`) and the kind of agent (`agentType`). Older versions keep
sidechain lines in the session file itself, mixed with the root's: those are left out with a note
(proxy.formats.harness_logs.claude_code), and such a run's children are not replayed.

A child whose transcript cannot be read is an error naming its file: a run read without one of its
children would replay a different run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from proxy.errors import LoadError
from proxy.names import is_valid_name
from proxy.replay.trajectory import Child, Trajectory, child_name

SUBAGENTS = "subagents"
PREFIX, SUFFIX, META = "agent-", ".jsonl", ".meta.json"
MOST = 1000  # children read for one run: a file tree is not a place to spend a start-up on


def with_children(
    path: Path, trajectory: Trajectory, load: Callable[[Path, str], Trajectory]
) -> Trajectory:
    """`trajectory` (read from `path`) with the children its harness recorded beside it; `load`
    reads one child's transcript under a name. Its digest then covers them too, so a session
    bound to it across workers replays the same children."""
    if trajectory.format != "claude-code":
        return trajectory
    folder = path.parent / path.name.removesuffix(SUFFIX) / SUBAGENTS
    if not folder.is_dir():
        return trajectory
    files = sorted(
        p for p in folder.iterdir() if p.name.startswith(PREFIX) and p.suffix == ".jsonl"
    )
    if len(files) > MOST:
        raise LoadError(
            str(folder), None, f"{len(files)} subagent transcripts; at most {MOST} are read"
        )
    children = []
    digest = hashlib.sha256(trajectory.digest.encode())
    for file in files:
        agent = file.name.removeprefix(PREFIX).removesuffix(SUFFIX)
        if not is_valid_name(agent):
            raise LoadError(str(file), None, "the agent id in the file name is not a name")
        child = load(file, child_name(trajectory.name, agent))
        if child.children:  # a folder beside a child's file is no layout Claude Code writes
            raise LoadError(str(file), None, "a subagent transcript with subagents of its own")
        spawned_by, kind = _meta(file.with_name(f"{PREFIX}{agent}{META}"))
        children.append(Child(agent, child, spawned_by, kind))
        digest.update(f"{agent}:{child.digest}".encode())
    if not children:
        return trajectory
    return replace(trajectory, children=tuple(children), digest=digest.hexdigest())


def _meta(path: Path) -> tuple[str | None, str | None]:
    """(the spawning tool call's id, the kind of agent) from a child's meta file, when there is
    one; a meta file that is there but unreadable is an error."""
    if not path.is_file():
        return None, None
    try:
        meta = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise LoadError(str(path), None, f"not a JSON object: {exc}") from None
    if not isinstance(meta, dict):
        raise LoadError(str(path), None, "not a JSON object")
    spawned_by, kind = meta.get("toolUseId"), meta.get("agentType")
    for key, value in (("toolUseId", spawned_by), ("agentType", kind)):
        if value is not None and not isinstance(value, str):
            raise LoadError(str(path), None, f"{key} is not a string")
    return spawned_by, kind
