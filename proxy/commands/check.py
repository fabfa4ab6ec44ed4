"""`replay-proxy check FILE...`: what each trajectory file will replay, said turn by turn (or as
JSON), and an exit code of 1 for a file that cannot be read or is probably misread."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from proxy.apis import BY_NAME
from proxy.errors import LoadError
from proxy.exits import EXIT_BAD_FILE
from proxy.formats import LEFT_OUT, load_all
from proxy.replay.tokens import Tokens
from proxy.replay.trajectory import Trajectory, not_served


def check(files: Sequence[Path], *, as_json: bool = False) -> int:
    failed = False
    described: list[dict[str, Any]] = []
    for path in files:
        try:
            found = load_all(path)
        except LoadError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
            if as_json:
                described.append({"filename": str(path), "error": exc.reason, "index": exc.index})
            continue
        left = sum(n.reason.startswith(LEFT_OUT) for n in found[0].skipped)
        if left > len(found):  # most of a file of several conversations could not be read
            print(
                f"{path}: {left} of its {left + len(found)} conversations could not be read "
                "(see the notes of the first one)",
                file=sys.stderr,
            )
            failed = True
        for trajectory in found:
            if as_json:
                described.append(trajectory.summary())
            else:
                print(describe(trajectory, named=len(found) > 1))
            wrong = misread(trajectory)
            if wrong is not None:
                print(f"{trajectory.filename}: {trajectory.name}: {wrong}", file=sys.stderr)
                failed = True
    if as_json:
        sys.stdout.write(orjson.dumps(described, option=orjson.OPT_INDENT_2).decode() + "\n")
    return EXIT_BAD_FILE if failed else 0


def _short(text: str, limit: int = 100) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _title(api: str) -> str:
    """An API's name as its row gives it."""
    return BY_NAME[api].title if api in BY_NAME else f"{api} API"


def misread(t: Trajectory) -> str | None:
    """Why a loaded trajectory is probably not the run its file records: most of its messages
    were dropped (a shape the rules do not fit; replaying it would go live at once)."""
    if t.read and 2 * len(t.dropped) > t.read:
        return (
            f"{len(t.dropped)} of its {t.read} messages were dropped, so the script is probably "
            "not the recorded run (a shape this proxy misreads): see the dropped notes above, "
            "and report the file"
        )
    return None


def _user(t: Trajectory, index: int) -> str:
    where = t.place(index)
    return f"user {where}" if where.startswith("message ") else f"user message at {where}"


def _tokens(tokens: Tokens) -> str:
    """What `check` says of a turn's recorded tokens."""
    said = []
    if tokens.generation is not None:
        said.append(f"{len(tokens.generation)} generated token ids")
    if tokens.prompt is not None:
        said.append(f"{len(tokens.prompt)} prompt ids")
    if tokens.generation_log_probs() is not None or tokens.entries is not None:
        said.append("logprobs")
    return f"{', '.join(said) or 'token fields'} ({tokens.style})"


def describe(t: Trajectory, *, named: bool = False) -> str:
    """What `check` prints of a trajectory; `named`: one of a file's several (rollouts), led by
    its own name (NAME.LINE), the one a request picks it by."""
    rounds = f"{t.rounds} round" + ("" if t.rounds == 1 else "s")
    lines = [
        f"{t.filename}: {t.name + ': ' if named else ''}{t.format}, {len(t.turns)} turns in "
        f"{rounds}, "
        f"{t.tool_call_count} tool calls",
        f"  task: {_short(t.task) if t.task is not None else '(none: no user message)'}",
    ]
    if t.text_based:
        lines.append(
            "  text-based: no turn calls a tool (the harness reads its actions from the text); "
            "the user messages between turns are its observations, and only a tool-less request "
            "with this system prompt and task takes a turn"
        )
    for turn in t.turns:
        for user in turn.follow_up:
            if t.text_based:
                lines.append(
                    f"  {_user(t, user.index)} is the observation of turn {turn.number - 1} "
                    "(the harness sends it; compared, not spliced)"
                )
                continue
            lines.append(
                f"  {_user(t, user.index)} opens round {turn.round} "
                "(the harness sends it; compared, not spliced)"
            )
        for user in turn.users_before:
            lines.append(f"  {_user(t, user.index)} comes before turn {turn.number} (spliced live)")
        parts = [
            f"{len(turn.tool_calls)} tool call(s)"
            if turn.tool_calls
            else "text"
            if t.text_based
            else "text only, final"
        ]
        if turn.reasoning:
            parts.append("reasoning")
        if turn.tokens is not None:  # served with the turn (docs/rl-pipelines.md)
            parts.append(_tokens(turn.tokens))
        lines.append(f"  turn {turn.number} ({t.place(turn.index)}): {', '.join(parts)}")
        if turn.text:
            lines.append(f"    text: {_short(turn.text)}")
        for call in turn.tool_calls:
            lines.append(f"    {call.name} [{call.id}] {_short(call.arguments)}")
            for api, field, value in not_served(call):
                lines.append(
                    f"  warning: turn {turn.number}, call {call.id} ({call.name}): its {field} "
                    f"{_short(str(value), 60)!r} is served only over the {_title(api)}; served over "
                    "another API it is left out, and a harness that needs it to "
                    "dispatch the call refuses it"
                )
    for user in t.trailing_users:
        lines.append(f"  {_user(t, user.index)} trails the last turn (spliced live)")
    for child in t.children:
        lines.append(
            f"  subagent {child.agent} ({child.kind or 'agent'}, spawned by "
            f"{child.spawned_by or 'an unknown call'}): {len(child.trajectory.turns)} turns "
            f"replayed in its own lane, from {child.trajectory.filename}; task: {_short(child.task or '')}"
        )
    for note in t.skipped:
        lines.append(f"  skipped {t.place_of_note(note)}: {note.reason}")
    for note in t.dropped:
        lines.append(f"  dropped {t.place_of_note(note)}: {note.reason}")
    if not t.turns:
        lines.append("  warning: no scripted turns; every request of its session goes upstream")
    return "\n".join(lines)
