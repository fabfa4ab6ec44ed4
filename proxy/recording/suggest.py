"""`replay-proxy masks suggest A B`: the masks that make two runs of the same task agree.

Every place the two differ (after the harness preset, as strict replay sees them) is explained by
a mask: a kind of value that changes between runs (a date, a path under a temporary folder, an id:
proxy.replay.volatile), or else a mask made from the text just before the difference ("the word
after `Working directory: `"). What no mask can explain is reported with its place: the model's
answers or tool calls differ, or a lane has another number of steps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from proxy.recording.diff import compared, preset_of
from proxy.replay.conversation import Lane
from proxy.replay.difference import first_mismatch, leaves, render, written
from proxy.replay.normalize import KEEP, mask_text
from proxy.replay.presets import Preset
from proxy.replay.trajectory import Trajectory
from proxy.replay.volatile import VOLATILE, judge

CONTEXT = 32  # characters of the line before a difference a made-up mask looks behind at
ROUNDS = 16  # made-up masks tried on one text before it counts as beyond masks
EXAMPLE = 80
_TOKEN = re.compile(r"[^\s\"'`<>()\[\]{},;]")
WORD = r"[^\s\"'`<>()\[\]{},;]+"
LINE = r"[^\n]+"
# what the model said and did is the run itself, not a value that changes between runs
MODEL_PARTS = frozenset({("text",), ("tool_calls",)})


@dataclass(slots=True)
class Suggestion:
    pattern: str
    what: str
    examples: tuple[str, str]  # what it matched in A and in B, at the first place
    places: list[str] = field(default_factory=list)

    def comment(self) -> list[str]:
        more = f" (and {len(self.places) - 1} more)" if len(self.places) > 1 else ""
        return [
            f"{self.what}: {render(self.examples[0], EXAMPLE)} in A, "
            f"{render(self.examples[1], EXAMPLE)} in B",
            f"at {self.places[0]}{more}",
        ]


@dataclass(slots=True)
class Suggested:
    masks: list[Suggestion]
    beyond: list[str]  # places no mask explains, each with what differs
    differences: int  # places that differ
    preset: Preset | None


def suggest(
    a: Trajectory, b: Trajectory, masks: Sequence[re.Pattern[str]] = (), *, presets: bool = True
) -> Suggested:
    found: dict[str, Suggestion] = {}
    beyond: list[str] = []
    differences = 0
    for lane, step, what, x, y in compared(a, b, masks, presets=presets):
        if step == 0:
            beyond.append(f"lane {lane}: {a.source} has {x} steps, {b.source} has {y}")
            continue
        for trail, p, q in leaves(x, y):
            differences += 1
            place = f"lane {lane}, step {step}, {what}: {written('', trail) or '$'}"
            if what == "the answer" and (lane != Lane.MAIN or trail[:1] in MODEL_PARTS):
                beyond.append(f"{place}: the model's answer differs ({render(p)} / {render(q)})")
                continue
            if not (isinstance(p, str) and isinstance(q, str)):
                beyond.append(f"{place}: {render(p)} against {render(q)}")
                continue
            explained = explain(p, q)
            if explained is None:
                beyond.append(f"{place}: {render(p)} against {render(q)}")
                continue
            for pattern, said, examples in explained:
                suggestion = found.setdefault(pattern, Suggestion(pattern, said, examples))
                suggestion.places.append(place)
    preset = (preset_of(a) or preset_of(b)) if presets else None
    return Suggested(list(found.values()), beyond, differences, preset)


def explain(p: str, q: str) -> list[tuple[str, str, tuple[str, str]]] | None:
    """(pattern, what it masks, what it matched in p and in q) for masks that make p and q equal;
    None when no mask can."""
    verdict = judge(p, q)
    if verdict.verdict == VOLATILE:
        return [(k.pattern.pattern, k.name, _examples(k.pattern, p, q)) for k in verdict.masks]
    out: list[tuple[str, str, tuple[str, str]]] = []
    a, b = p, q
    for _ in range(ROUNDS):
        if a == b:
            return out
        made = _made_up(a, b)
        if made is None:
            return None
        pattern = re.compile(made)
        examples = _examples(pattern, a, b)
        masked_a, masked_b = mask_text(a, (pattern,)), mask_text(b, (pattern,))
        if first_mismatch(masked_a, masked_b) <= first_mismatch(a, b) and masked_a != masked_b:
            return None  # no progress: the mask does not reach the difference
        out.append((made, "the text after what comes before it", examples))
        a, b = masked_a, masked_b
    return out if a == b else None


def _made_up(a: str, b: str) -> str | None:
    """A mask for the first stretch where a and b differ: the token there (or the rest of the
    line, when it holds spaces), found by the text before it on its line."""
    start = first_mismatch(a, b)
    while start > 0 and _TOKEN.match(a[start - 1]):
        start -= 1
    line = a.rfind("\n", 0, start) + 1
    context = a[max(line, start - CONTEXT) : start]
    tail = first_mismatch(a[start:][::-1], b[start:][::-1])
    spans = a[start : len(a) - tail], b[start : len(b) - tail]
    shape = WORD if not any(re.search(r"\s", s) for s in spans) else LINE
    if not context:
        return f"(?m)^{shape}"
    return f"(?P<keep>{re.escape(context)}){shape}"


def _examples(pattern: re.Pattern[str], a: str, b: str) -> tuple[str, str]:
    """What the pattern matches in each text where they differ (else its first match)."""
    start = first_mismatch(a, b)

    keep = KEEP in pattern.groupindex

    def masked(match: re.Match[str]) -> str:  # what becomes <masked>: not its `keep` group
        return match.string[match.end(KEEP) if keep else match.start() : match.end()]

    def at(text: str) -> str:
        first = None
        for match in pattern.finditer(text):
            first = first or match
            if match.end() >= start:
                return masked(match)
        return masked(first) if first else ""

    return at(a), at(b)


def mask_file(found: Suggested, a: str, b: str) -> str:
    """The suggestions as a file `--mask-file` reads: each pattern under comments on what it
    matched and where."""
    lines = [f"# masks that make A and B agree (replay-proxy masks suggest)\n# A: {a}\n# B: {b}"]
    if found.preset is not None:
        lines.append(f"# on top of the {found.preset.name} preset, which strict replay applies")
    for suggestion in found.masks:
        lines.append("")
        lines.extend(f"# {line}" for line in suggestion.comment())
        lines.append(suggestion.pattern)
    return "\n".join(lines) + "\n"
