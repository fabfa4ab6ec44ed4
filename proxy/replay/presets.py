"""Harness presets: what legitimately changes between two runs of the same task, per harness.

Each preset was found by recording the real harness twice on the same task, in different folders
and on different dates, and comparing the two recordings (docs/harnesses/ lists each value and
why it changes). A preset has two kinds of rule:

- values: a pattern whose group captures a per-run value where the harness states it (its working
  directory, its home or temporary folder). Every occurrence of that value anywhere in the body is
  masked, wherever else it appears (tool descriptions, tool output, a directory tree);
- masks: patterns masked wherever they match (a date in the harness's own words, a process id);
- orders: a list the harness writes in no fixed order (Gemini CLI finds its skills with an
  unordered glob): its items are put in one order before comparing, everything around and
  between them kept as it is, so another item or another text still differs.

The harness is recognised from its user agent or from the opening of its system prompt (and, where
a home-made agent may well copy that prompt, from text only the harness's own first messages hold);
a recording stores the name of the preset it was recorded with.

Every mask covers a value and nothing after it: a mask that ran to the end of its line would also
hide whatever a changed run wrote after the value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

SHORTEST_VALUE = 3  # a captured "/" or "." would mask every path
# per top-level value of a body: its items searched (1 for a value that is no list), the value
# rules still wanted there, and what each one's first match in it captured
Found = dict[str, tuple[int, tuple[int, ...], dict[int, str]]]


@dataclass(frozen=True, slots=True)
class Rule:
    what: str  # what changes, as docs/harnesses/ names it
    pattern: re.Pattern[str]

    @classmethod
    def of(cls, what: str, pattern: str) -> Rule:
        return cls(what, re.compile(pattern))


@dataclass(frozen=True, slots=True)
class Order:
    """A list the harness writes in no fixed order: within each `block`, the `item`s sorted."""

    what: str
    needle: str  # text every block holds: most texts are not looked at further
    block: re.Pattern[str]  # the list, its items in the group "items"
    item: re.Pattern[str]

    def sorted(self, text: str) -> str:
        if self.needle not in text:
            return text
        return self.block.sub(self._sorted_block, text)

    def _sorted_block(self, match: re.Match[str]) -> str:
        inner = match.group("items")
        items = sorted(self.item.findall(inner))
        between = self.item.split(inner)  # the text around and between the items, as it is
        parts = [between[0]]
        for item, after in zip(items, between[1:], strict=True):
            parts += [item, after]
        start, end = match.span("items")
        whole = match.string
        return whole[match.start() : start] + "".join(parts) + whole[end : match.end()]


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    title: str
    agents: tuple[str, ...]  # user-agent prefixes
    markers: tuple[str, ...]  # text that opens the system prompt or the first messages
    # text the first messages must also hold (one of them): a marker alone is a prompt anyone may
    # copy
    requires: tuple[str, ...] = ()
    values: tuple[Rule, ...] = ()
    masks: tuple[Rule, ...] = ()
    orders: tuple[Order, ...] = ()

    def canonical(self, text: str) -> str:
        """The text with the harness's unordered lists in one order."""
        for order in self.orders:
            text = order.sorted(text)
        return text

    def patterns(self, body: Any, found: Found | None = None) -> tuple[re.Pattern[str], ...]:
        """The masks for one request body: the fixed ones, and the values it states, literally
        (`found`: its values_since, when they are known already)."""
        if found is None:
            found = self.values_since(body)
        stated: set[str] = set()
        for _, _, first in found.values():  # each rule has its first value in one place
            for captured in first.values():
                value = captured.rstrip("/")
                if len(value) >= SHORTEST_VALUE:
                    stated.add(value)
        fixed = tuple(rule.pattern for rule in self.masks)
        if not stated:
            return fixed
        # the longest first, so a folder inside another is masked whole
        values = sorted(stated, key=lambda v: (-len(v), v))
        return (*(re.compile(re.escape(v)) for v in values), *fixed)

    def values_since(
        self, body: Any, same: Mapping[str, int] | None = None, since: Found | None = None
    ) -> Found:
        """Where each value rule first matches in the body's texts, in the order they come: per
        top-level value, what its first match captures, for the rules no earlier value matched.
        `same` and `since`: what the session's previous body left (proxy.replay.normalize.Seen),
        so that a value unchanged since then, or a list's leading items, are not searched again."""
        wanted = tuple(range(len(self.values)))
        if not isinstance(body, dict):
            return {"": (1, wanted, self._first(body, wanted))}
        out: Found = {}
        for key, item in body.items():
            if not wanted:
                break
            old = since.get(key) if since is not None else None
            size = len(item) if isinstance(item, list) else 1
            if old is not None and old[1] == wanted and (same or {}).get(key, 0) == old[0]:
                first = dict(old[2])  # searched: what came since is searched for the others
                rest = tuple(i for i in wanted if i not in first)
                if isinstance(item, list) and rest and size > old[0]:
                    first.update(self._first(item[old[0] :], rest))
            else:
                first = self._first(item, wanted)
            out[key] = (size, wanted, first)
            wanted = tuple(i for i in wanted if i not in first)
        return out

    def _first(self, value: Any, wanted: tuple[int, ...]) -> dict[int, str]:
        """What each wanted value rule's first match in `value`'s texts captures."""
        first: dict[int, str] = {}
        left = list(wanted)
        for text in _strings(value):
            for i in list(left):
                match = self.values[i].pattern.search(text)
                if match is not None:
                    left.remove(i)
                    first[i] = match.group(1)
            if not left:
                break
        return first


PRESETS: tuple[Preset, ...] = (
    Preset(
        "claude-code",
        "Claude Code",
        agents=("claude-cli/",),
        markers=("x-anthropic-billing-header:", "You are Claude Code", "Claude Agent SDK"),
        values=(
            Rule.of("working directory", r"Primary working directory: (\S+)"),
            # "file-based memory at" (2.1.197), "file-based memory system at" (2.1.332)
            Rule.of(
                "memory folder (under its config folder)",
                r"file-based memory (?:system )?at `([^`\n]+)`",
            ),
        ),
        masks=(
            Rule.of("today's date", r"(?P<keep>Today's date is )\d{4}-\d\d-\d\d"),
            Rule.of("the month", r"(?P<keep>The current month is )[A-Z][a-z]+ \d{4}"),
            Rule.of("commit hashes in its git snapshot", r"(?m)^[0-9a-f]{7,40}(?= )"),
            Rule.of(
                "its billing header",
                r"(?P<keep>x-anthropic-billing-header: )[a-z_]+=[\w.-]*;(?: [a-z_]+=[\w.-]*;)*",
            ),
            # an Agent tool's result names the child it ran, with what the child cost: new on
            # every run, while what the child did (its tool uses) is the run's own
            Rule.of("a subagent's id in its Agent result", r"(?P<keep>agentId: )[0-9a-f]{8,}"),
            Rule.of("a subagent's id in SendMessage advice", r"(?P<keep>to: ')[0-9a-f]{8,}(?=')"),
            Rule.of("a subagent's token count", r"(?P<keep>subagent_tokens: )\d+"),
            Rule.of("a subagent's run time", r"(?P<keep>duration_ms: )\d+"),
        ),
    ),
    Preset(
        "codex",
        "Codex CLI",
        agents=("codex_exec/", "codex_cli_rs/", "codex-tui/"),
        markers=("running in the Codex CLI", "<environment_context>"),
        values=(
            Rule.of("working directory", r"<cwd>([^<\n]+)</cwd>"),
            Rule.of("workspace root", r"<root>([^<\n]+)</root>"),
            Rule.of("CODEX_HOME (its skills folder)", r"= `([^`\n]+)/skills/\.system`"),
        ),
        masks=(
            Rule.of("today's date", r"(?P<keep><current_date>)\d{4}-\d\d-\d\d(?=</current_date>)"),
            Rule.of("the time zone", r"(?P<keep><timezone>)[\w+/-]+(?=</timezone>)"),
            Rule.of("the output chunk id", r"(?P<keep>Chunk ID: )[0-9a-f]+"),
            Rule.of("the command's wall time", r"(?P<keep>Wall time: )[\d.]+(?= seconds)"),
        ),
    ),
    Preset(
        "gemini-cli",
        "Gemini CLI",
        agents=("GeminiCLI/",),
        markers=("This is the Gemini CLI", "You are a non-interactive CLI agent"),
        values=(
            Rule.of("workspace directory", r"Workspace Directories:\**\n +- (\S+)"),
            Rule.of("its temporary folder", r"temporary directory is: (\S+)"),
        ),
        masks=(
            Rule.of(
                "today's date", r"(?P<keep>Today's date is )[A-Z][a-z]+, [A-Z][a-z]+ \d{1,2}, \d{4}"
            ),
            Rule.of("the shell's process group", r"(?P<keep>Process Group PGID: )\d+"),
        ),
        orders=(
            Order(
                "the order of its skills (found by an unordered glob)",
                "<available_skills>",
                re.compile(r"<available_skills>(?P<items>.*?)</available_skills>", re.S),
                re.compile(r"<skill>.*?</skill>", re.S),
            ),
        ),
    ),
    Preset(
        "opencode",
        "opencode",
        agents=("opencode/",),
        markers=("You are opencode",),
        values=(
            Rule.of("working directory", r"Working directory: (\S+)"),
            Rule.of("workspace root", r"Workspace root folder: (\S+)"),
            Rule.of("its temporary folder ($TMPDIR/opencode)", r"Use `([^`\n]+)` for temporary"),
        ),
        masks=(
            Rule.of(
                "today's date", r"(?P<keep>Today's date: )[A-Z][a-z]{2} [A-Z][a-z]{2} \d\d \d{4}"
            ),
            # a task call's result names the child session it ran: new on every run
            Rule.of("a subagent's session in its task result", r'(?P<keep><task id=")ses_\w+'),
        ),
    ),
    Preset(
        "openhands",
        "OpenHands",
        agents=(),
        markers=("You are OpenHands agent",),
        values=(
            Rule.of("working directory", r"current working directory is: (\S+)"),
            Rule.of("working directory", r"\[Current working directory: ([^\]\n]+)\]"),
            Rule.of("its Python interpreter", r"\[Python interpreter: ([^\]\n]+)\]"),
        ),
    ),
    Preset(
        "mini-swe-agent",
        "mini-swe-agent",
        agents=(),
        markers=("You are a helpful assistant that can interact with a computer",),
        # its task template's way to end a run, in tool and in text mode alike
        requires=("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",),
    ),
    Preset("openai-agents", "openai-agents", agents=("Agents/Python",), markers=()),
)
PRESET_BY_NAME = {p.name: p for p in PRESETS}
OPENING = 4096  # how much of each opening text is searched for a marker


def recognise(body: Any, user_agent: str = "") -> Preset | None:
    """The preset of the harness that sent `body`: by its user agent, else by its opening."""
    for preset in PRESETS:
        if user_agent.startswith(preset.agents) and preset.agents:
            return preset
    texts = list(_openings(body))
    openings = [text[:OPENING] for text in texts]
    for preset in PRESETS:
        if _holds(openings, preset.markers) and (
            # a task comes before the template's own text, and a task may be long: its end too
            not preset.requires
            or _holds([*openings, *(t[-OPENING:] for t in texts)], preset.requires)
        ):
            return preset
    return None


def _holds(openings: list[str], texts: tuple[str, ...]) -> bool:
    return any(text in opening for text in texts for opening in openings)


def _openings(body: Any) -> Iterator[str]:
    """The first texts of a request, whatever its API: system prompt, instructions, the first
    messages (Codex sends its own as developer and user messages)."""
    if not isinstance(body, dict):
        return
    for key in ("system", "instructions", "systemInstruction"):
        yield from _texts(body.get(key), 3)
    for key in ("messages", "input", "contents"):
        history = body.get(key)
        if isinstance(history, list):
            for item in history[:3]:
                yield from _texts(item, 3)


def _texts(value: Any, limit: int) -> Iterator[str]:
    """Up to `limit` strings from the top of `value` (a string, a block, a list of blocks)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key in ("text", "content", "parts"):
            if key in value:
                yield from _texts(value[key], limit)
                return
    elif isinstance(value, list):
        for item in value[:limit]:
            yield from _texts(item, limit)


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON value, depth first, without recursion (bodies nest deeply)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
