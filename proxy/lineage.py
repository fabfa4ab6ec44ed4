"""Whose agent a request is: a subagent's calls, told apart by the headers each harness sends.

A subagent never takes a scripted turn (its calls go upstream, or in strict mode are answered from
the recording's side exchanges); the status shows it as a lane of its own beside its parent. Each
harness marks a child in its own way, and sends it with the session id of the root, so the
child's calls land in the root's session unless a header says otherwise:

- Codex CLI: `x-openai-subagent` names the kind of child (`collab_spawn` for an agent spawned by
  `spawn_agent`, `review`, `compact`, `memory_consolidation`, or a label of its own); a spawned
  child also sends `x-codex-parent-thread-id`, its parent's thread id, and its own in `thread-id`.
  The `session-id` it sends is the root's.
- Claude Code 2.x: `x-claude-code-agent-id` is the child's own id, sent with the parent's session
  id; a child spawned by a child also sends `x-claude-code-parent-agent-id`.
- opencode: `x-parent-session-id` is the parent session's id; the child is a session of its own.

Any other header in the subagent-header list marks a subagent too, its value read as the parent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# what each harness sends (lower case, as the settings keep them)
CODEX_KIND = "x-openai-subagent"
CODEX_PARENT = "x-codex-parent-thread-id"
CODEX_THREAD = "thread-id"  # the thread's own id, which every Codex request carries
CLAUDE_AGENT = "x-claude-code-agent-id"
CLAUDE_PARENT = "x-claude-code-parent-agent-id"
OPENCODE_PARENT = "x-parent-session-id"

# headers whose value is the parent's id, in the order they are believed
PARENT_HEADERS = (CODEX_PARENT, CLAUDE_PARENT, OPENCODE_PARENT)
SUBAGENTS_KEPT = 100  # a session's status lists this many subagents, the latest


@dataclass(frozen=True, slots=True)
class Lineage:
    """A subagent's request: what the status shows of it."""

    parent: str  # the parent's id: a thread, an agent, or the session the request came in
    child: str | None  # the subagent's own id, when its harness sends one
    kind: str | None  # what kind of child, when its harness says (Codex's x-openai-subagent)
    header: str  # the header that marked it

    @property
    def parent_session(self) -> str | None:
        """The parent's session, when the child is a session of its own (opencode's
        x-parent-session-id): the root its calls belong to. None when the child's calls come in
        its root's session (Claude Code, Codex)."""
        return self.parent if self.header == OPENCODE_PARENT else None

    def as_dict(self) -> dict[str, str | None]:
        return {"parent": self.parent, "child": self.child, "kind": self.kind, "by": self.header}

    def describe(self) -> str:
        who = f"subagent {self.child}" if self.child else "subagent"
        kind = f" ({self.kind})" if self.kind else ""
        return f"{who}{kind} of {self.parent}"


def lineage_of(
    headers: Mapping[str, str], marks: Sequence[str], session: str | None
) -> Lineage | None:
    """The lineage of a request, when a header of `marks` (the subagent-header list) is present;
    None for an agent's own calls. `session` is the session the request came in, the parent of a
    child that names no other (a Claude Code agent, a Codex review or compaction)."""
    header = next((h for h in marks if headers.get(h)), None)
    if header is None:
        return None
    value = headers.get(header) or ""
    kind = (headers.get(CODEX_KIND) or None) if CODEX_KIND in marks else None
    parent = next((v for h in PARENT_HEADERS if h in marks and (v := headers.get(h))), None)
    child = None
    if header in (CODEX_KIND, CODEX_PARENT) or kind is not None:
        child = headers.get(CODEX_THREAD) or None
    elif CLAUDE_AGENT in marks and headers.get(CLAUDE_AGENT):
        child = headers.get(CLAUDE_AGENT)
    if parent is None:
        known = header in (CODEX_KIND, CLAUDE_AGENT)
        # a harness's own header that names the child, not the parent: the parent is the session
        parent = (session or "-") if known else value
    return Lineage(parent, child, kind, header)
