"""Harness presets: what legitimately changes between two runs of the same task, per harness.

Each preset was found by recording the real harness twice on the same task, in different folders
and on different dates, and comparing the two recordings (docs/harnesses/ lists each value and
why it changes). A preset has two kinds of rule:

- values: a pattern whose group captures a per-run value where the harness states it (its working
  directory, its home or temporary folder). Every occurrence of that value anywhere in the body is
  masked, wherever else it appears (tool descriptions, tool output, a directory tree);
- masks: patterns masked wherever they match (a date in the harness's own words, a process id).

The harness is recognised from its user agent or from the opening of its system prompt; a
recording stores the name of the preset it was recorded with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

SHORTEST_VALUE = 3  # a captured "/" or "." would mask every path


@dataclass(frozen=True, slots=True)
class Rule:
    what: str  # what changes, as docs/harnesses/ names it
    pattern: re.Pattern[str]

    @classmethod
    def of(cls, what: str, pattern: str) -> Rule:
        return cls(what, re.compile(pattern))


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    title: str
    agents: tuple[str, ...]  # user-agent prefixes
    markers: tuple[str, ...]  # text that opens the system prompt or the first messages
    values: tuple[Rule, ...] = ()
    masks: tuple[Rule, ...] = ()

    def patterns(self, body: Any) -> tuple[re.Pattern[str], ...]:
        """The masks for one request body: the fixed ones, and the values it states, literally."""
        found: set[str] = set()
        wanted = list(self.values)
        for text in _strings(body):
            for rule in list(wanted):
                match = rule.pattern.search(text)
                if match is not None:
                    wanted.remove(rule)
                    value = match.group(1).rstrip("/")
                    if len(value) >= SHORTEST_VALUE:
                        found.add(value)
            if not wanted:
                break
        fixed = tuple(rule.pattern for rule in self.masks)
        if not found:
            return fixed
        # the longest first, so a folder inside another is masked whole
        values = sorted(found, key=lambda v: (-len(v), v))
        return (*(re.compile(re.escape(v)) for v in values), *fixed)


PRESETS: tuple[Preset, ...] = (
    Preset(
        "claude-code",
        "Claude Code",
        agents=("claude-cli/",),
        markers=("x-anthropic-billing-header:", "You are Claude Code", "Claude Agent SDK"),
        values=(
            Rule.of("working directory", r"Primary working directory: (\S+)"),
            Rule.of("memory folder (under its config folder)", r"file-based memory at `([^`\n]+)`"),
        ),
        masks=(
            Rule.of("today's date", r"(?P<keep>Today's date is )\d{4}-\d\d-\d\d"),
            Rule.of("the month", r"(?P<keep>The current month is )[A-Z][a-z]+ \d{4}"),
            Rule.of("commit hashes in its git snapshot", r"(?m)^[0-9a-f]{7,40}(?= )"),
            Rule.of("its billing header", r"(?P<keep>x-anthropic-billing-header: )[^\n]*"),
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
            Rule.of("today's date", r"(?P<keep><current_date>)[^<\n]*(?=</current_date>)"),
            Rule.of("the time zone", r"(?P<keep><timezone>)[^<\n]*(?=</timezone>)"),
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
    ),
    Preset("openai-agents", "openai-agents", agents=("Agents/Python",), markers=()),
)
BY_NAME = {p.name: p for p in PRESETS}
OPENING = 4096  # how much of each opening text is searched for a marker


def recognise(body: Any, user_agent: str = "") -> Preset | None:
    """The preset of the harness that sent `body`: by its user agent, else by its opening."""
    for preset in PRESETS:
        if user_agent.startswith(preset.agents) and preset.agents:
            return preset
    openings = [text[:OPENING] for text in _openings(body)]
    for preset in PRESETS:
        if any(marker in text for marker in preset.markers for text in openings):
            return preset
    return None


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
