r"""`replay-proxy masks suggest A B`: the masks that make two runs of the same task agree.

Every place the two differ (after the harness preset, as strict replay sees them) is explained by a
mask no wider than the value that differs there, or not at all:

- a kind of value that changes between runs (a date, a path under a temporary folder, an id:
  proxy.replay.volatile), or a mask of the recordings' own preset, when it matches a value on both
  sides over the difference;
- else a mask made for it: the value's shape, found by the literal text around it on its line,
  such as `(?P<keep>Primary\ working\ directory:\ )<a path>(?=\n)`. A shape is a number (4 digits
  or more, or with a fraction: a process id, a duration), a hex id, a path, or an id holding letters
  and digits; the same shape on both sides.

What has no such shape is beyond masks, and reported with its place: a word (`PASSED` against
`FAILED`), a short number (an exit status, a count), anything with spaces, text added or taken out,
a value with no literal text around it on its line; a difference inside a tool call (the commands);
the model's answers or tool calls; a lane with another number of steps.
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
from proxy.replay.volatile import candidates, cover, in_call

CONTEXT = 32  # characters of literal text on the line before (and after) a made-up mask's value
ANCHOR = 3  # non-space characters that context must hold: less would match all over the text
ROUNDS = 16  # masks tried on one text before it counts as beyond masks
EXAMPLE = 80
# what a value is made of (no space, quote, shell metacharacter, `=` or `:`, which end one)
_TOKEN = r"[\w./%+~-]"
_IS_TOKEN = re.compile(_TOKEN)
_SEGMENT = r"(?!\.\.(?![\w.%+~-]))[\w.%+~-]+"  # a path's, never `..`
# what the model said and did is the run itself, not a value that changes between runs
MODEL_PARTS = frozenset({("text",), ("tool_calls",)})


@dataclass(frozen=True, slots=True)
class Shape:
    """A kind of value a mask may be made for: both differing values must be `test`s."""

    name: str
    test: re.Pattern[str]
    pattern: str  # what the mask matches in its place


def _shape(name: str, test: str, pattern: str | None = None) -> Shape:
    return Shape(name, re.compile(test), pattern or test)


_ID = r"(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[\w.-]{4,}"
SHAPES: tuple[Shape, ...] = (
    # 1 to 3 digits are a count or an exit status: what the run did, not a value
    _shape("a number", r"\d{4,}"),
    _shape("a number with a fraction", r"\d+\.\d+"),
    _shape("a hex id", r"(?=[0-9a-f]*\d)[0-9a-f]{6,64}", r"[0-9a-f]{6,64}"),
    _shape("a hex id", r"(?=[0-9A-F]*\d)[0-9A-F]{6,64}", r"[0-9A-F]{6,64}"),
    _shape(
        "a path", rf"(?=\S*/)/?{_SEGMENT}(?:/{_SEGMENT})*/?", rf"/?{_SEGMENT}(?:/{_SEGMENT})*/?"
    ),
    _shape("an id", _ID, r"[\w.-]+"),
)


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
    # the recordings' own harness: its masks are the first suggestions, even with --no-presets
    own = preset_of(a) or preset_of(b)
    for lane, step, what, x, y in compared(a, b, masks, presets=presets):
        if step == 0:
            beyond.append(f"lane {lane}: {a.filename} has {x} steps, {b.filename} has {y}")
            continue
        for trail, p, q in leaves(x, y):
            differences += 1
            place = f"lane {lane}, step {step}, {what}: {written('', trail) or '$'}"
            if what == "the answer" and (lane != Lane.MAIN or trail[:1] in MODEL_PARTS):
                beyond.append(f"{place}: the model's answer differs ({render(p)} / {render(q)})")
                continue
            if in_call(x, y, trail):
                beyond.append(f"{place}: a tool call differs ({render(p)} / {render(q)})")
                continue
            if not (isinstance(p, str) and isinstance(q, str)):
                beyond.append(f"{place}: {render(p)} against {render(q)}")
                continue
            explained = explain(p, q, own)
            if explained is None:
                beyond.append(f"{place}: {render(p)} against {render(q)}")
                continue
            for pattern, said, examples in explained:
                suggestion = found.setdefault(pattern, Suggestion(pattern, said, examples))
                suggestion.places.append(place)
    return Suggested(list(found.values()), beyond, differences, own if presets else None)


def explain(
    p: str, q: str, preset: Preset | None = None
) -> list[tuple[str, str, tuple[str, str]]] | None:
    """(pattern, what it masks, what it matched in p and in q) for masks that make p and q equal,
    each over a value at a place they differ; None when some difference is no such value."""
    out: list[tuple[str, str, tuple[str, str]]] = []
    kinds = candidates(preset)
    a, b = p, q
    for _ in range(ROUNDS):
        if a == b:
            return out
        start = first_mismatch(a, b)
        known = next((k for k in kinds if cover(k.pattern, a, start, b, start)), None)
        if known is not None:
            pattern, said = known.pattern, known.name
        else:
            made = _made_up(a, b, start)
            if made is None:
                return None
            pattern, said = made
        masked_a, masked_b = mask_text(a, (pattern,)), mask_text(b, (pattern,))
        if (masked_a, masked_b) == (a, b):
            return None
        out.append((pattern.pattern, said, _examples(pattern, a, b)))
        a, b = masked_a, masked_b
    return out if a == b else None


def _made_up(a: str, b: str, start: int) -> tuple[re.Pattern[str], str] | None:
    """A mask for the value where a and b first differ: its shape, between the literal text
    before it on its line and the text after it; None when it has no shape or no such text."""
    begin = start
    while begin > 0 and _IS_TOKEN.match(a[begin - 1]):
        begin -= 1
    value_a, value_b = a[begin : _token_end(a, start)], b[begin : _token_end(b, start)]
    shape = next(
        (s for s in SHAPES if s.test.fullmatch(value_a) and s.test.fullmatch(value_b)), None
    )
    if shape is None:
        return None
    line = a.rfind("\n", 0, begin) + 1
    before = a[max(line, begin - CONTEXT) : begin]
    rest_a, rest_b = a[begin + len(value_a) :], b[begin + len(value_b) :]
    after = rest_a[: first_mismatch(rest_a[:CONTEXT], rest_b[:CONTEXT])]
    after = after[: after.find("\n") + 1] if "\n" in after else after
    if len("".join((before + after).split())) < ANCHOR:
        return None  # a value alone on its line: nothing says where it is
    head = f"(?P<{KEEP}>{_literal(before)})" if before else "(?m)^"
    tail = f"(?={_literal(after)})" if after else f"(?!{_TOKEN})"
    pattern = re.compile(f"{head}{shape.pattern}{tail}")
    if cover(pattern, a, start, b, start) is None:
        return None  # the mask would not hold the value on both sides
    return pattern, f"{shape.name} after what comes before it"


_CONTROL = {f"\\{c}": f"\\{e}" for c, e in zip("\n\r\t\v\f", "nrtvf", strict=True)}


def _literal(text: str) -> str:
    """`text` as a pattern on one line: a mask file holds one pattern a line."""
    escaped = re.escape(text)
    for raw, named in _CONTROL.items():
        escaped = escaped.replace(raw, named)
    return escaped


def _token_end(text: str, at: int) -> int:
    while at < len(text) and _IS_TOKEN.match(text[at]):
        at += 1
    return at


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
