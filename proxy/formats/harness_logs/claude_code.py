"""Claude Code session transcripts: `~/.claude/projects/<project>/<session id>.jsonl`.

JSONL, one entry per line, each with a `type`. The conversation is the `user` and `assistant`
lines (`message` is the Anthropic Messages API message); Claude Code writes one line per content
block as it streams, so the blocks of one API response are consecutive lines sharing `message.id`.
Every chat message remembers the line it came from (an assistant message: its first line):

- the `assistant` lines of one `message.id` -> one assistant message: `text` blocks -> content
  (joined with newlines), `thinking` -> reasoning_content, `tool_use` -> its tool_calls, in order
  (parallel calls stay together; the `tool_use` id is the call id, `input` the arguments);
- each `tool_result` block of a `user` line -> a tool message for its `tool_use_id` (its text);
- any other `user` line -> a user message (its text); the first is the task;
- left out, each with a note: the lines of a subagent (`isSidechain: true`; Claude Code 2.x keeps
  them in a file of their own, `<session id>/subagents/agent-<id>.jsonl`, which reads as a
  conversation of its own), what Claude Code adds itself (`isMeta` lines, slash commands and local
  command output, the summary written at a compaction, interruption markers, synthetic or API-error
  replies), the compaction boundary, and one note counting every line that is not conversation
  (summaries, attachments, snapshots, queue operations, ...).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Hashable
from typing import Any

from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Lines, Misfit, Reader, Script
from proxy.replay.content import text_of

TALK = frozenset({"user", "assistant"})
# the other line types Claude Code writes (1.0 to 2.1): none is a turn
OTHER = frozenset({
    "summary", "system", "attachment", "file-history-snapshot", "queue-operation", "last-prompt",
    "mode", "progress", "custom-title", "ai-title", "tag", "agent-name", "pr-link",
})  # fmt: skip
SUBAGENT_TOOLS = frozenset({"Agent", "Task"})  # "Task" before Claude Code 2.1
# user text Claude Code writes itself for slash commands, `!` shell commands and interruptions
LOCAL = (
    "<command-name>", "<command-message>", "<command-args>", "<local-command-stdout>",
    "<local-command-stderr>", "<local-command-caveat>", "<bash-input>", "<bash-stdout>",
    "<bash-stderr>", "[Request interrupted by user",
)  # fmt: skip
SCAN = 50  # lines `miss` looks at: a resumed 1.0 transcript may open with many summary lines


def miss(lines: Lines) -> Misfit | None:
    expected = "expected a Claude Code transcript"
    marks = 0
    for index, value in lines[:SCAN]:
        if not isinstance(value, dict):
            return Misfit(f"{expected}: line {index + 1} is not an object", marks)
        kind = value.get("type")
        keyed = any(k in value for k in ("sessionId", "uuid", "leafUuid", "messageId"))
        if kind in TALK and isinstance(value.get("message"), dict) and keyed:
            return None
        marks = max(marks, int(kind in TALK or kind in OTHER) + int(keyed))
    if marks == 2:  # only Claude Code's own line types so far: its conversation comes later
        return None
    scanned = lines[:SCAN]
    where = (
        f"line {scanned[0][0] + 1} has"
        if len(scanned) == 1
        else (f"lines {scanned[0][0] + 1}-{scanned[-1][0] + 1} have")
    )
    return Misfit(
        f'{expected}: {where} no "type": "user" or "assistant" with a "message" and a "sessionId"',
        marks,
    )


def convert(lines: Lines, filename: str) -> list[Converted]:
    talk = [v for _, v in lines if isinstance(v, dict) and v.get("type") in TALK]
    # a subagent's own file (Claude Code 2.x): every line is on the sidechain
    subagent = bool(talk) and all(v.get("isSidechain") is True for v in talk)
    b = _Builder(filename)
    for index, value in lines:
        if not isinstance(value, dict):
            raise LoadError(filename, index, "line is not a JSON object")
        kind = value.get("type")
        if kind not in TALK:
            b.other(index, value)
            continue
        if value.get("isSidechain") is True and not subagent:
            b.sidechain(index, value)
            continue
        b.sidechain_run = None
        message = value.get("message")
        if not isinstance(message, dict):
            raise LoadError(filename, index, f'a "{kind}" line without a "message" object')
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        elif not isinstance(content, list):
            raise LoadError(filename, index, "message.content must be a string or a list of blocks")
        for j, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise LoadError(filename, index, f"message.content[{j}] has no type")
        if kind == "assistant":
            b.assistant(index, value, message, content)
        else:
            b.user(index, value, content)
    if subagent:
        b.note(
            lines[0][0],
            "a subagent's own transcript (every line isSidechain): read as the conversation",
        )
    return [b.done()]


class _Builder(Script):
    def __init__(self, filename: str) -> None:
        super().__init__()
        self.filename = filename
        self.current: dict[str, Any] | None = None  # the assistant message being put together
        self.current_id: Any = None  # its message.id
        # the blocks it holds (a repeated one is skipped), as _frozen keys; those too deeply
        # nested to freeze are kept as they are
        self.seen: set[Hashable] = set()
        self.deep: list[dict[str, Any]] = []
        # its text and thinking blocks' texts, joined once the file is read (each added to the
        # last is quadratic); one (message, texts, thoughts) per assistant message
        self.texts: list[Any] = []
        self.thoughts: list[Any] = []
        self.parts: list[tuple[dict[str, Any], list[Any], list[Any]]] = []
        self.calls: dict[str, str] = {}  # tool_use id -> tool name
        self.others: Counter[str] = Counter()
        self.first_other: int | None = None
        self.runs: list[list[Any]] = []  # each subagent's sidechain: [first line, lines, agent]
        self.sidechain_run: list[Any] | None = None  # the one still open
        self.redacted = 0

    def other(self, index: int, value: dict[str, Any]) -> None:
        kind = value.get("type")
        if kind == "system" and value.get("subtype") == "compact_boundary":
            self.note(index, "a compaction: Claude Code replaced the conversation with a summary")
            return
        label = str(kind) if kind in OTHER else "other"
        if kind == "system" and isinstance(value.get("subtype"), str):
            label = f"system ({value['subtype']})"
        self.others[label] += 1
        if self.first_other is None:
            self.first_other = index

    def sidechain(self, index: int, value: dict[str, Any]) -> None:
        agent = value.get("agentId")
        run = self.sidechain_run
        if run is None or (agent is not None and run[2] != agent):
            run = self.sidechain_run = [index, 0, agent]
            self.runs.append(run)
        run[1] += 1

    def assistant(
        self, index: int, value: dict[str, Any], message: dict[str, Any], blocks: list[Any]
    ) -> None:
        if value.get("isApiErrorMessage") is True or message.get("model") == "<synthetic>":
            self.note(index, "a reply Claude Code made itself (an API error or a synthetic one)")
            self.current = None
            return
        mid = message.get("id")
        if self.current is None or mid is None or mid != self.current_id:
            self.current, self.current_id = {"role": "assistant", "content": ""}, mid
            self.seen, self.deep, self.texts, self.thoughts = set(), [], [], []
            self.parts.append((self.current, self.texts, self.thoughts))
            self.add(self.current, index)
        current = self.current
        if isinstance(message.get("usage"), dict):  # each line of a message: the last is whole
            current["usage"] = message["usage"]
        current.setdefault("created", value.get("timestamp"))
        for j, block in enumerate(blocks):
            if self._repeated(block):
                continue
            kind = block["type"]
            if kind == "text":
                self.texts.append(block.get("text") or "")
            elif kind == "thinking":
                current.setdefault("reasoning_content", "")  # the key where the first one put it
                self.thoughts.append(block.get("thinking") or "")
            elif kind == "redacted_thinking":
                self.redacted += 1
            elif kind == "tool_use":
                current.setdefault("tool_calls", []).append(self._call(block, index, j))
            else:
                self.note(index, f"a {kind} block: the API ran it itself, not the harness")

    def _repeated(self, block: dict[str, Any]) -> bool:
        """Whether the message already holds a block equal to this one; if not, it does now."""
        try:
            key = _frozen(block)
        except RecursionError:  # equal blocks nest equally deep: these only meet each other
            if block in self.deep:
                return True
            self.deep.append(block)
            return False
        if key in self.seen:
            return True
        self.seen.add(key)
        return False

    def _call(self, block: dict[str, Any], index: int, j: int) -> dict[str, Any]:
        call_id, name, arguments = block.get("id"), block.get("name"), block.get("input", {})
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise LoadError(
                self.filename, index, f"message.content[{j}]: tool_use needs an id and a name"
            )
        if not isinstance(arguments, dict):
            raise LoadError(self.filename, index, f"message.content[{j}].input must be an object")
        self.calls[call_id] = name
        text = json.dumps(arguments, ensure_ascii=False)
        return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}

    def user(self, index: int, value: dict[str, Any], blocks: list[dict[str, Any]]) -> None:
        results = [b for b in blocks if b["type"] == "tool_result"]
        texts = [b.get("text") for b in blocks if b["type"] == "text"]
        for j, block in enumerate(results):
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise LoadError(self.filename, index, f"tool_result {j} has no tool_use_id")
            self.add(
                {"role": "tool", "tool_call_id": call_id, "content": text_of(block.get("content"))},
                index,
            )
            if self.calls.get(call_id) in SUBAGENT_TOOLS:
                self._subagent(index, value, call_id)
        if results:  # a tool-result line's own text is Claude Code's (an interruption, a hook)
            if any(texts):
                self.note(index, "text beside tool results (Claude Code adds it itself)")
            return
        why = _left_out(value, [t for t in texts if isinstance(t, str)])
        if why is not None:
            self.note(index, why)
            return
        for block in blocks:
            if block["type"] != "text":
                self.note(index, f"a {block['type']} block of a user message (not replayed)")
        if not any(isinstance(t, str) and t for t in texts):
            self.note(index, "a user message with no text")
            return
        self.current = None  # a new prompt: the next response is a new message
        self.add(
            {"role": "user", "content": "\n".join(t for t in texts if isinstance(t, str))}, index
        )

    def _subagent(self, index: int, value: dict[str, Any], call_id: str) -> None:
        result = value.get("toolUseResult")
        agent = result.get("agentId") if isinstance(result, dict) else None
        where = (
            f"its transcript is <session id>/subagents/agent-{agent}.jsonl"
            if isinstance(agent, str)
            else "its lines are on the sidechain"
        )
        self.note(index, f"call {call_id} ran a subagent ({self.calls[call_id]} tool): {where}")

    def done(self) -> Converted:
        for first, count, agent in self.runs:
            named = f" ({agent})" if agent else ""
            why = (
                f"a subagent's sidechain{named}, {count} lines from here: not the main conversation"
            )
            self.note(first, why)
        if self.redacted:
            self.note(
                self.indexes[0] if self.indexes else 0,
                f"{self.redacted} redacted_thinking blocks: encrypted reasoning, not shown",
            )
        if self.others and self.first_other is not None:
            counted = ", ".join(f"{kind} x{n}" for kind, n in self.others.most_common())
            self.note(self.first_other, f"lines that are not conversation: {counted}")
        for message, texts, thoughts in self.parts:
            message["content"] = _added(texts, "\n")
            if thoughts:
                message["reasoning_content"] = _added(thoughts, "\n\n")
        for message in self.messages:
            if message["role"] == "assistant" and not message["content"]:
                message["content"] = None  # calls only
        self.notes.sort(key=lambda n: n.index)
        return self.converted()


def _frozen(value: Any) -> Hashable:
    """A hashable stand-in for a JSON value, equal to another's exactly when the values are equal
    (a dict's is a frozenset of its items, a list's a tuple: the two never meet)."""
    if isinstance(value, dict):
        items = []
        for key, item in value.items():  # a loop, not a comprehension: one frame per level
            items.append((key, _frozen(item)))
        return frozenset(items)
    if isinstance(value, list):
        frozen = []
        for item in value:
            frozen.append(_frozen(item))
        return tuple(frozen)
    hashable: Hashable = value
    return hashable


def _added(values: list[Any], sep: str) -> Any:
    """What adding each value with `f"{so_far}{sep}{value}" if so_far else value` gives, in one
    join: the values from the first non-empty one on (a non-string formatted as that f-string
    does; a lone one as it is), or the last value when none is."""
    for k, value in enumerate(values):
        if value:
            if k == len(values) - 1:
                return value
            return sep.join(v if isinstance(v, str) else f"{v}" for v in values[k:])
    return values[-1] if values else ""


def _left_out(value: dict[str, Any], texts: list[str]) -> str | None:
    """Why a user line is not a user message, or None when it is one."""
    if value.get("isCompactSummary") is True:
        return "the summary of a compaction (Claude Code sends it itself after compacting)"
    if value.get("isMeta") is True:
        return "a message Claude Code adds itself (isMeta)"
    if value.get("isVisibleInTranscriptOnly") is True:
        return "shown in the transcript only, never sent to the model"
    first = texts[0].lstrip() if texts else ""
    for marker in LOCAL:
        if first.startswith(marker):
            return (
                f"a slash command, local command or interruption ({marker}...): Claude Code's own"
            )
    return None


READER = Reader(name="claude-code", lines=True, miss=miss, convert=convert)
