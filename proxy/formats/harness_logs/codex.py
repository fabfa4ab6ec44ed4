"""Codex CLI rollouts: `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`.

JSONL. Each line is `{"timestamp", "type", "payload"}`; the first is `session_meta`. The
conversation is the `response_item` payloads, the Responses API items Codex sent and received, in
order. Rollouts of Codex before about 0.30 have no wrapper: a first line `{"id", "timestamp",
"instructions"}`, then bare items and `{"record_type": "state"}` lines; they read the same way.
Every chat message remembers its line (an assistant message: the line of its first item):

- `session_meta.payload.base_instructions.text` -> the system prompt (what Codex sends first);
- the assistant-side items of one model response (`reasoning`, an assistant `message`,
  `function_call`, `custom_tool_call`, `local_shell_call`) -> one assistant message: message text
  -> content, reasoning summaries -> reasoning_content (reasoning kept only encrypted cannot be
  shown), calls -> its tool_calls with their `call_id`. A response ends at Codex's per-response
  bookkeeping line (`token_usage_record`, an `event_msg` `token_count`, a `state` record), at a user
  or developer message, or, in a file with no such line, at a tool output; so parallel calls stay
  together even when Codex wrote an output between them;
- `function_call_output` / `custom_tool_call_output` -> a tool message for its `call_id`;
- a user `message` -> a user message; the first is the task. Codex's own context is left out:
  user messages it writes itself (`<environment_context>`, AGENTS.md and user instructions, skills,
  `<subagent_notification>`, `<turn_aborted>`, ...) and `developer` messages;
- a `function_call`'s `namespace` (Codex's `multi_agent_v1` tools, an MCP server's) is kept and
  served with the call over the Responses API; a field of a call item the proxy does not know is
  reported;
- a `custom_tool_call` (a freeform tool) -> arguments `{"input": <its text>}`; `local_shell_call`
  -> a call of `shell` with `{"command", "workdir", "timeout_ms"}`, as Codex itself runs it;
- left out, each with a note: web searches (the API runs them), compactions, a subagent's thread
  (a rollout of its own), and one note counting the lines that are not conversation (`event_msg`
  UI events that repeat it, `turn_context`, `world_state`, token records, ...).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from proxy.apis.responses_history import DISPATCH_FIELDS, content_parts
from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Lines, Misfit, Reader, Script
from proxy.replay.content import appended, text_of
from proxy.replay.trajectory import DISPATCH, Usage, dispatch_of
from proxy.replay.usage import OutOfRange, nested, token_count

# the fields of a call item the proxy reads or makes itself, and Codex's own bookkeeping (which it
# takes out before a request to another provider: no harness dispatches by it); any other field is
# reported, not served
_OWN = {"type", "id", "status", "call_id", "internal_chat_message_metadata_passthrough"}
KNOWN_CALL_FIELDS = {
    "function_call": _OWN | {"name", "arguments", *DISPATCH_FIELDS},
    "custom_tool_call": _OWN | {"name", "input", *DISPATCH_FIELDS},
    "local_shell_call": _OWN | {"action"},
}
LINE_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
ITEMS = CALLS | OUTPUTS | {"message", "reasoning", "web_search_call"}
CONTEXT = (  # user messages Codex writes itself (codex-rs: is_contextual_user_message)
    "<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<INSTRUCTIONS>",
    "<skills_instructions>", "<skill>", "<user_shell_command>", "<subagent_notification>",
    "<turn_aborted>", "<context_update>", "<hook_prompt",
)  # fmt: skip


def miss(lines: Lines) -> Misfit | None:
    index, first = lines[0]
    expected = "expected a Codex rollout"
    if not isinstance(first, dict):
        return Misfit(f"{expected}: line {index + 1} is not an object")
    if first.get("type") == "session_meta" and isinstance(first.get("payload"), dict):
        return None
    old = "type" not in first and "id" in first and "timestamp" in first
    if old and any(_old_line(value) for _, value in lines[1:6]):
        return None  # a rollout of Codex before the wrapper
    marks = int(isinstance(first.get("payload"), dict)) + int(first.get("type") in LINE_TYPES)
    where = f'line {index + 1} has no "type": "session_meta" with a "payload"'
    return Misfit(f"{expected}: {where}", marks)


def _old_line(value: Any) -> bool:
    return isinstance(value, dict) and (
        value.get("record_type") == "state" or value.get("type") in ITEMS
    )


def convert(lines: Lines, filename: str) -> list[Converted]:
    b = _Builder(filename, _entries(lines, filename))
    b.read()
    b.notes.sort(key=lambda n: n.index)
    return [b.converted(system=b.system)]


def _entries(lines: Lines, filename: str) -> list[tuple[int, str, Any]]:
    """(line index, line type, payload), for either generation."""
    old = isinstance(lines[0][1], dict) and "type" not in lines[0][1]
    out = []
    for position, (index, value) in enumerate(lines):
        if not isinstance(value, dict):
            raise LoadError(filename, index, "line is not a JSON object")
        if not old:
            kind = value.get("type")
            if not isinstance(kind, str):
                raise LoadError(filename, index, 'line has no "type"')
            out.append((index, kind, value.get("payload")))
        elif position == 0:
            out.append((index, "session_meta", value))
        elif value.get("record_type") is not None:
            out.append((index, str(value["record_type"]), value))
        else:
            out.append((index, "response_item", value))
    return out


class _Builder(Script):
    def __init__(self, filename: str, entries: list[tuple[int, str, Any]]) -> None:
        super().__init__()
        self.filename = filename
        self.entries = entries
        self.system: str | None = None
        self.current: dict[str, Any] | None = None  # the model response being put together
        # its message texts and reasoning summaries, joined once the file is read (each added
        # to the last is quadratic); one (message, texts, thoughts) per response
        self.texts: list[str] = []
        self.thoughts: list[str] = []
        self.parts: list[tuple[dict[str, Any], list[str], list[str]]] = []
        self.names: dict[str, str] = {}  # call_id -> tool name
        self.others: Counter[str] = Counter()
        self.first_other: int | None = None
        self.context: list[int] = []  # lines of Codex's own context messages
        self.encrypted = 0
        self.marked = any(_boundary(kind, payload) for _, kind, payload in entries)

    def read(self) -> None:
        for index, kind, payload in self.entries:
            if _boundary(kind, payload):
                if self.current is not None and (counts := _last_usage(payload)) is not None:
                    try:  # what the response just completed cost
                        self.current["usage"] = token_counts(counts)
                    except OutOfRange as exc:
                        raise LoadError(self.filename, index, str(exc)) from None
                self.current = None
            if kind == "response_item":
                if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
                    raise LoadError(self.filename, index, 'a response_item without a "type"')
                self.item(index, payload)
            elif kind == "session_meta":
                self.meta(index, payload)
            elif kind == "compacted":
                self.note(index, "a compaction: Codex replaced the history with a summary here")
            else:
                if isinstance(payload, dict) and payload.get("type") == "thread_rolled_back":
                    self.note(index, "Codex rolled turns back here; they are kept")
                self.others[kind] += 1
                self.first_other = index if self.first_other is None else self.first_other
        for message, texts, thoughts in self.parts:
            message["content"] = appended(texts, "\n")
            if len(thoughts) > 1:
                message["reasoning_content"] = "\n\n".join(thoughts)
        for message in self.messages:
            if message["role"] == "assistant" and not message["content"]:
                message["content"] = None  # calls only
        first = self.indexes[0] if self.indexes else 0
        if self.context:
            what = "developer instructions, environment context, notifications"
            why = f"{len(self.context)} messages of Codex's own context ({what}): it adds them"
            self.note(self.context[0], why)
        if self.encrypted:
            why = f"{self.encrypted} reasoning items with encrypted content only: not shown"
            self.note(first, why)
        if self.others and self.first_other is not None:
            counted = ", ".join(f"{kind} x{n}" for kind, n in self.others.most_common())
            self.note(self.first_other, f"lines that are not conversation: {counted}")

    def meta(self, index: int, payload: Any) -> None:
        if not isinstance(payload, dict):
            raise LoadError(self.filename, index, "session_meta has no payload object")
        base = payload.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base
        if isinstance(text, str) and self.system is None:
            self.system = text
        origin = payload.get("source")
        if isinstance(origin, dict) and "subagent" in origin:
            parent = payload.get("parent_thread_id") or "another thread"
            self.note(index, f"a subagent's thread, spawned by {parent}: read as the conversation")

    def item(self, index: int, item: dict[str, Any]) -> None:
        kind = item["type"]
        role = item.get("role")
        if kind == "message" and role == "assistant":
            self.response(index)
            self.texts.append(text_of(content_parts(item.get("content"))))
        elif kind == "message":
            self.current = None
            self.message(index, item, role)
        elif kind == "reasoning":
            self.reasoning(index, item)
        elif kind in CALLS:
            self.response(index).setdefault("tool_calls", []).append(self.call(index, item))
        elif kind in OUTPUTS:
            if not self.marked:
                self.current = None
            self.output(index, item)
        elif kind == "web_search_call":
            self.note(index, "a web search: the API ran it itself, not the harness")
        else:
            self.others[f"response_item ({kind})"] += 1
            self.first_other = index if self.first_other is None else self.first_other

    def response(self, index: int) -> dict[str, Any]:
        if self.current is None:
            self.current = {"role": "assistant", "content": ""}
            self.add(self.current, index)
            self.texts, self.thoughts = [], []
            self.parts.append((self.current, self.texts, self.thoughts))
        return self.current

    def message(self, index: int, item: dict[str, Any], role: Any) -> None:
        if not isinstance(role, str):
            raise LoadError(self.filename, index, "a message item without a role")
        parts = content_parts(item.get("content"))
        text = text_of(parts)
        if role != "user" or text.lstrip().startswith(CONTEXT):
            self.context.append(index)
            return
        for part in item.get("content") or []:
            if isinstance(part, dict) and part.get("type") not in ("input_text", "output_text"):
                self.note(index, f"a {part.get('type')} part of a user message (not replayed)")
        self.add({"role": "user", "content": text}, index)

    def reasoning(self, index: int, item: dict[str, Any]) -> None:
        texts = [s.get("text") for s in item.get("summary") or [] if isinstance(s, dict)]
        texts += [c.get("text") for c in item.get("content") or [] if isinstance(c, dict)]
        shown = "\n\n".join(t for t in texts if isinstance(t, str) and t)
        if not shown:
            self.encrypted += int(bool(item.get("encrypted_content")))
            return
        current = self.response(index)
        current.setdefault("reasoning_content", shown)  # the key where the first one put it
        self.thoughts.append(shown)

    def call(self, index: int, item: dict[str, Any]) -> dict[str, Any]:
        kind = item["type"]
        call_id = item.get("call_id") or (item.get("id") if kind == "local_shell_call" else None)
        name = "shell" if kind == "local_shell_call" else item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise LoadError(self.filename, index, f"a {kind} item needs a call_id and a name")
        if kind == "function_call":
            arguments = item.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments if arguments is not None else {})
        elif kind == "custom_tool_call":
            arguments = json.dumps({"input": item.get("input", "")}, ensure_ascii=False)
            self.note(index, f'call {call_id}: a freeform tool, read as arguments {{"input": ...}}')
        else:
            action = item.get("action")
            action = action if isinstance(action, dict) else {}
            shell = {"command": action.get("command"), "workdir": action.get("working_directory"),
                     "timeout_ms": action.get("timeout_ms")}  # fmt: skip
            arguments = json.dumps({k: v for k, v in shell.items() if v is not None})
        self.names[call_id] = name
        call: dict[str, Any] = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        if (
            kind != "local_shell_call"
            and (dispatch := dispatch_of("responses", DISPATCH_FIELDS, item)) is not None
        ):
            call[DISPATCH] = dispatch  # its namespace (multi_agent_v1, mcp__...): Codex needs it
        unknown = sorted(set(item) - KNOWN_CALL_FIELDS.get(kind, set()))
        if unknown:
            fields = ", ".join(unknown)
            self.note(
                index, f"call {call_id}: its {fields} not served (the proxy does not know it)"
            )
        return call

    def output(self, index: int, item: dict[str, Any]) -> None:
        call_id = item.get("call_id")
        if not isinstance(call_id, str):
            raise LoadError(self.filename, index, f"a {item['type']} item without a call_id")
        output = item.get("output")
        if isinstance(output, dict):  # {"content", "success"}, as some versions wrote it
            output = output.get("content")
        text = output if isinstance(output, str) else text_of(content_parts(output))
        self.add({"role": "tool", "tool_call_id": call_id, "content": text}, index)
        if self.names.get(call_id) == "spawn_agent":
            agent = _agent_id(text)
            where = f"rollout-*-{agent}.jsonl" if agent else "a rollout of its own"
            self.note(index, f"call {call_id} spawned a subagent thread: {where}")


def _boundary(kind: str, payload: Any) -> bool:
    """A line Codex writes once a model response is complete."""
    if kind in ("token_usage_record", "state"):
        return True
    return (
        kind == "event_msg" and isinstance(payload, dict) and payload.get("type") == "token_count"
    )


def _last_usage(payload: Any) -> dict[str, Any] | None:
    """The token counts of the response a bookkeeping line closes, in Codex's own field names:
    a token_usage_record's `usage`, or a token_count event's `info.last_token_usage`."""
    if not isinstance(payload, dict):
        return None
    usage = payload.get("usage")
    if isinstance(usage, dict):
        return usage
    info = payload.get("info")
    last = info.get("last_token_usage") if isinstance(info, dict) else None
    return last if isinstance(last, dict) else None


def token_counts(value: dict[str, Any]) -> Usage | None:
    """Codex's token counts (`cached_input_tokens`, `reasoning_output_tokens`, ...), or a
    Responses usage's names, which a token_usage_record keeps; None when it holds no counts."""
    if "input_tokens" not in value and "output_tokens" not in value:
        return None
    return Usage(
        token_count(value.get("input_tokens")),
        token_count(value.get("output_tokens")),
        token_count(
            nested(value, "input_tokens_details", "cached_tokens")
            or value.get("cached_input_tokens")
        ),
        token_count(value.get("cache_write_input_tokens")),
        token_count(
            nested(value, "output_tokens_details", "reasoning_tokens")
            or value.get("reasoning_output_tokens")
        ),
    )


def _agent_id(output: str) -> str | None:
    try:
        value = json.loads(output)
    except ValueError:
        return None
    agent = value.get("agent_id") if isinstance(value, dict) else None
    return agent if isinstance(agent, str) else None


READER = Reader(name="codex", lines=True, miss=miss, convert=convert)
