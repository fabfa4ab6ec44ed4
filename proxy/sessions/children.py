"""Which recorded child a live subagent replays, and the lane it replays in.

A run loaded with its children (proxy.formats.children) replays each of them in a lane of its own:
a session `<root session>.agent-<recorded agent id>` bound to the child's own conversation, decided
by the same rules as the main lane (turns by tool-call id, branching, observations, hand-off). A
live child is bound once, on its first request, and stays bound (the root session keeps the map):

- by the harness's lineage header: the live child's id (Claude Code's x-claude-code-agent-id,
  Codex's thread-id) is the key; a child with no id of its own is not replayed (its calls go on
  as subagent calls);
- to the first recorded child not yet bound whose task (the spawning call's prompt, its first user
  message) one of the request's user messages before its first answer holds, in the recorded
  order: parallel children with different prompts find their own in any order, and two with the
  same prompt are the same work;
- only a child spawned by a replayed call (one of the root's planned turns): a child a live turn
  spawned after the cut is the live model's work, and goes on as a subagent.

Pure: the registry (proxy.sessions.registry) keeps the map in the store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from proxy.names import is_valid_name
from proxy.replay.conversation import Conversation
from proxy.replay.trajectory import Child, Trajectory, child_name
from proxy.store.state import SessionState

LANE_MARK = ".agent-"


def lane_session(root: str, agent: str) -> str:
    """The session id of a recorded child's lane under the root session: `<root>.agent-<agent>`,
    or, when that is too long to be a name, a digest of the two (the root's status names it)."""
    lane = f"{root}{LANE_MARK}{agent}"
    if is_valid_name(lane):
        return lane
    digest = hashlib.sha256(f"{root}\x00{agent}".encode()).hexdigest()[:32]
    return f"{root[:100]}{LANE_MARK}{digest}"


def script_name(script: Trajectory, agent: str) -> str:
    return child_name(script.name, agent)


def prompts(conv: Conversation) -> list[str]:
    """What a child's request was asked: its user messages before the first answer (a harness
    may send its own context first, as Codex does, or put reminders around the prompt, as Claude
    Code does)."""
    first = conv.replies[0].position if conv.replies else conv.message_count
    return [text for _, text in conv.users_between(-1, first)] or [conv.task or ""]


def asked(child: Child, said: list[str]) -> bool:
    """One of the request's prompts holds what the recorded child was asked."""
    want = (child.task or "").strip()
    return bool(want) and any(want in text for text in said)


def choose(
    script: Trajectory, said: list[str], bound: Mapping[str, str], state: SessionState
) -> str | None:
    """The agent id of the first recorded child not yet bound that was asked one of `said` and
    was spawned by a replayed call (a call of the root's planned turns; a child whose spawning
    call is unknown, only before the root's hand-off): a child a live turn spawned is the live
    model's, never the recording's."""
    taken = set(bound.values())
    replayed = _calls(script, state.turns_planned)
    before_cut = state.prefix_messages is None
    for c in script.children:
        spawned = c.spawned_by in replayed if c.spawned_by is not None else before_cut
        if spawned and c.agent not in taken and asked(c, said):
            return c.agent
    return None


def not_started(script: Trajectory, bound: Mapping[str, str], handoff: int) -> list[Child]:
    """The recorded children spawned by a call of the first `handoff` turns that no live child
    replays: the harness never started them (or started them with another task). A child whose
    spawning call is unknown (no meta file) is not counted: when it was due cannot be told."""
    calls = _calls(script, handoff)
    taken = set(bound.values())
    return [c for c in script.children if c.agent not in taken and c.spawned_by in calls]


def _calls(script: Trajectory, turns: int) -> set[str]:
    return {c.id for t in script.turns[:turns] for c in t.tool_calls}
