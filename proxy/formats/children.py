"""The subagents a run spawned, read from the transcripts the harness keeps of each beside the run's
own log, so that a resumed run's children replay what they did, not a live model.

- Claude Code 2.1.x writes each child of session `<id>` to `<project>/<id>/subagents/agent-<agent
  id>.jsonl` (every line `isSidechain: true`), with `agent-<agent id>.meta.json` beside it naming
  the tool call that spawned it (`toolUseId`) and the kind of agent (`agentType`). Older versions
  keep sidechain lines in the session file itself, mixed with the root's: those are left out with
  a note (proxy.formats.harness_logs.claude_code), and such a run's children are not replayed.
- opencode runs each `task` call's subagent in a child session, whose id the call's output names
  (`<task id="ses_...">`); `opencode export <id>` prints it. The child is read from an export
  beside the root's whose file name holds its id (`ses_....json`).
- Codex writes each child thread to a rollout of its own, `rollout-<time>-<thread id>.jsonl`, in
  the sessions folder of the day it started (its `session_meta` names the parent thread); the
  root's `spawn_agent` call's output names the thread (`{"agent_id": ...}`), so the spawning call
  is known. The child is looked for beside the root's rollout, then in the other day folders of
  the same sessions tree.

A child whose transcript is there but cannot be read is an error naming its file. A child whose
transcript is not there (a run's log copied alone) is not replayed: its calls are subagent calls as
before, fenced or sent upstream, and `check` shows where its transcript would be. Nor is, with a
note: a child whose id is not a name, whose name with the run's would be too long, or whose file
is a link out of the run's folder (of the sessions tree, for Codex); a child's own children (one
level is replayed).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from proxy.errors import LoadError
from proxy.names import inside, is_valid_name
from proxy.replay.trajectory import Child, Note, Trajectory, child_name

SUBAGENTS = "subagents"
PREFIX, SUFFIX, META = "agent-", ".jsonl", ".meta.json"
MOST = 1000  # children read for one run: a file tree is not a place to spend a start-up on

# agent id, its file, the spawning call, its kind, whether that call's output only names it
Found = tuple[str, Path, str | None, str | None, bool]


def with_children(
    path: Path, trajectory: Trajectory, load: Callable[[Path, str], Trajectory]
) -> Trajectory:
    """`trajectory` (read from `path`) with the children its harness recorded beside it; `load`
    reads one child's transcript under a name. Its digest then covers them too, so a session
    bound to it across workers replays the same children."""
    if trajectory.format == "claude-code":
        found = _claude_code(path)
    elif trajectory.format == "codex":
        found = _codex(path, trajectory)
    elif trajectory.format == "opencode":
        found = _opencode(path, trajectory)
    else:
        return trajectory
    if len(found) > MOST:
        raise LoadError(str(path), None, f"{len(found)} subagents; at most {MOST} are read")
    children: list[Child] = []
    notes: list[Note] = []
    digest = hashlib.sha256(trajectory.digest.encode())
    base = path.parent if trajectory.format != "codex" else _sessions_root(path)
    for agent, file, spawned_by, kind, named_only in found:
        name = child_name(trajectory.name, agent)
        why = _unusable(agent, name, file, base)
        if why is not None:  # left out, said: its calls go on as subagent calls
            notes.append(Note(-1, f"subagent {agent[:80]!r} is not replayed: {why}", str(file)))
            continue
        child = load(file, name)
        if child.children:  # one level of children is replayed: its own go on as subagents
            notes.append(Note(-1, "its own subagents are not replayed (one level is)", str(file)))
            child = replace(child, children=())
        children.append(Child(agent, child, spawned_by, kind, named_only))
        digest.update(f"{agent}:{child.digest}".encode())
    if not children and not notes:
        return trajectory
    return replace(
        trajectory,
        children=tuple(children),
        digest=digest.hexdigest() if children else trajectory.digest,
        skipped=(*trajectory.skipped, *notes),
    )


def _unusable(agent: str, name: str, file: Path, base: Path) -> str | None:
    """Why a child's transcript is not replayed, or None."""
    if not is_valid_name(agent):
        return "its id is not a name (letters, digits and . _ : - only)"
    if not is_valid_name(name):
        return f"the run's name with the child's ({name[:60]!r}...) is longer than a name may be"
    if not inside(base, file):
        return f"its file leads out of {base} (a link)"
    return None


def _sessions_root(path: Path) -> Path:
    """A Codex rollout's sessions tree (its folder three levels up, when those are a date),
    else its own folder: where its children may be."""
    day = path.parent
    dated = [day, day.parent, day.parent.parent]
    if len(day.parents) >= 3 and all(p.name.isdigit() for p in dated):
        return day.parents[2]
    return day


def _claude_code(path: Path) -> list[Found]:
    folder = path.parent / path.name.removesuffix(SUFFIX) / SUBAGENTS
    if not folder.is_dir():
        return []
    found: list[Found] = []
    for file in sorted(folder.iterdir()):
        if file.name.startswith(PREFIX) and file.name.endswith(SUFFIX):
            agent = file.name.removeprefix(PREFIX).removesuffix(SUFFIX)
            spawned_by, kind, depth = _meta(file.with_name(f"{PREFIX}{agent}{META}"))
            if depth <= 1:  # a child's own children (spawnDepth 2, ...) are not the root's
                found.append((agent, file, spawned_by, kind, False))
    return found


def _meta(path: Path) -> tuple[str | None, str | None, int]:
    """(the spawning tool call's id, the kind of agent, its depth: 1 for a child of the root) from
    a child's meta file, when there is one; a meta file that is there but unreadable is an
    error."""
    if not path.is_file():
        return None, None, 1
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
    depth = meta.get("spawnDepth", 1)
    if not isinstance(depth, int) or isinstance(depth, bool) or not 0 < depth < 2**31:
        raise LoadError(str(path), None, "spawnDepth is not a whole number of 1 or more")
    return spawned_by, kind, depth


def _codex(path: Path, trajectory: Trajectory) -> list[Found]:
    """Each thread a `spawn_agent` call of the root started, by the id its output names."""
    found: list[Found] = []
    for turn in trajectory.turns:
        for call in turn.tool_calls:
            if call.name != "spawn_agent":
                continue
            thread = _thread_of(trajectory.tool_outputs.get(call.id))
            if thread is None:
                continue  # no output (the run ended there), or a spawn that failed
            file = _rollout_of(path, thread) if is_valid_name(thread) else None
            if file is None:  # not copied with the run: its calls are not replayed (the
                continue  # reader's note on the spawn says where its rollout would be)
            found.append((thread, file, call.id, "collab_spawn", True))
    return found


def _thread_of(output: str | None) -> str | None:
    try:
        value = json.loads(output or "")
    except ValueError:
        return None
    agent = value.get("agent_id") if isinstance(value, dict) else None
    return agent if isinstance(agent, str) and agent else None


def _rollout_of(path: Path, thread: str) -> Path | None:
    """rollout-*-<thread>.jsonl beside `path`, else in its sessions tree (YYYY/MM/DD folders)."""
    pattern = f"rollout-*-{thread}{SUFFIX}"
    beside = sorted(path.parent.glob(pattern))
    if beside:
        return beside[0]
    root = _sessions_root(path)
    if root != path.parent:
        found = sorted(root.glob(f"*/*/*/{pattern}"))
        return found[0] if found else None
    return None


_TASK_ID = re.compile(r'<task id="([^"]+)"')


def _opencode(path: Path, trajectory: Trajectory) -> list[Found]:
    """Each child session a `task` call ran, from its export beside the root's."""
    found: list[Found] = []
    for turn in trajectory.turns:
        for call in turn.tool_calls:
            if call.name != "task":
                continue
            named = _TASK_ID.search(trajectory.tool_outputs.get(call.id) or "")
            if named is None or not is_valid_name(session := named.group(1)):
                continue  # no output (the run ended there), or a task that failed
            beside = sorted(p for p in path.parent.glob(f"*{session}*.json") if p != path)
            if beside:  # not exported with the run: its calls are not replayed
                found.append((session, beside[0], call.id, "task", False))
    return found
