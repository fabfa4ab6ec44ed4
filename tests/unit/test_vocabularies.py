"""One source per vocabulary: the fault kinds are `Kind` (proxy/replay/faults.py) and the lanes
are `Lane` (proxy/replay/conversation.py). Code derives its lists from the enums; the docs write
them out, so each place a doc lists them is held here to the enum, in both directions: a kind or
lane added, renamed or dropped fails until the docs say so.

A doc's list is read between two markers that stand in the doc; a marker that is no longer found
fails too, so a rewritten sentence is checked again rather than silently skipped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from proxy.cli import _parser
from proxy.http import faulted, forward
from proxy.recording import diff
from proxy.replay import faults
from proxy.replay.conversation import CONVERSATION_LANES, Lane
from proxy.replay.faults import ERRORS, FaultError, Kind, listed, parse_flag
from tests.conftest import ROOT

KINDS = [kind.value for kind in Kind]
LANES = [lane.value for lane in Lane]
CONVERSATION = [lane.value for lane in CONVERSATION_LANES]


def between(path: Path, start: str, end: str) -> str:
    text = path.read_text()
    assert start in text, f"{path.name}: {start!r} is no longer there: where are the words now?"
    after = text[text.index(start) + len(start) :]
    assert end in after, f"{path.name}: {end!r} no longer follows {start!r}"
    return after[: after.index(end)]


def quoted(text: str) -> list[str]:
    """The `words` of a passage, as a list of kinds or lanes writes them: `stall:SECONDS` is
    stall, a flag (`--fault ...`) is not a word of the list."""
    return [
        word.removesuffix(":SECONDS")
        for word in re.findall(r"`([^`]+)`", text)
        if not word.startswith("-")
    ]


# (file, the list starts after, and ends before)
KIND_LISTS = [
    ("docs/configuration.md", "at scripted turn TURN of every session:", "(repeatable"),
    ("docs/admin-api.md", '`{"turn": K, "kind": ', ', "times"'),
    ("docs/resilience.md", "## Faults", "A `stall` or `delay` watches"),
    ("docs/glossary.md", "**Fault**", "(`--fault"),
    ("README.md", "or per session through the admin API):", "; what each harness does"),
]


@pytest.mark.parametrize(("doc", "start", "end"), KIND_LISTS)
def test_a_doc_lists_the_fault_kinds_of_the_enum(doc: str, start: str, end: str) -> None:
    text = between(ROOT / doc, start, end)
    if doc == "docs/resilience.md":  # a table: the kinds are its first column
        text = " ".join(re.findall(r"^\| ([^|]*) \|", text, re.MULTILINE))
    if doc == "docs/admin-api.md":  # a JSON shape: "429" | "500" | ...
        text = re.sub(r'"([^"]+)"', r"`\1`", text)
    assert quoted(text) == KINDS


def test_the_fault_kinds_in_the_modules_own_table() -> None:
    assert faults.__doc__ is not None
    table = faults.__doc__.split("turn.\n\n")[1].split("\n\nThe plan")[0]
    firsts = re.findall(r"^    (\S.*?)\s{3}", table, re.MULTILINE)
    assert [w.removesuffix(":SECONDS") for first in firsts for w in first.split(", ")] == KINDS


def test_the_error_kinds_where_the_docs_name_only_those() -> None:
    statuses = [kind.value for kind in ERRORS]
    errors = between(ROOT / "docs/errors.md", "| 429 |", "A real upstream error")
    assert re.findall(r"K:(\w+)", errors) == statuses
    headers = (ROOT / "docs/admin-api.md").read_text()
    assert f"except an injected {listed(statuses)}, which" in headers
    assert set(faulted.WHAT) == set(ERRORS)  # each error kind has its words


def test_the_help_and_the_refusals_name_every_kind() -> None:
    serve = _parser().parse_known_args(["serve"])[0].usage_of
    (help_text,) = [a.help for a in serve._actions if a.dest == "fault"]
    assert help_text is not None
    for kind in Kind:
        assert re.search(rf"\b{kind.spec}\b", help_text), kind
    with pytest.raises(FaultError) as refused:
        parse_flag("3")
    assert f"KIND one of {', '.join(KINDS)})" in str(refused.value)


def test_the_refusal_resilience_shows_is_the_one_the_proxy_gives() -> None:
    with pytest.raises(FaultError) as refused:
        parse_flag("3:teapot")
    page = (ROOT / "docs/resilience.md").read_text()
    assert f"replay-proxy: --fault: {refused.value}\n" in page


# (file, the list starts after, ends before, the lanes it names)
LANE_LISTS = [
    ("docs/glossary.md", "**Lane**", "**Side call**", LANES),
    ("docs/record-strict-diff.md", "in every lane (", "which go to", LANES),
    ("docs/replay.md", "The lanes are", "One exception", CONVERSATION),
    ("docs/admin-api.md", "| `forwarded` |", "\n", CONVERSATION),
]


@pytest.mark.parametrize(("doc", "start", "end", "lanes"), LANE_LISTS)
def test_a_doc_lists_the_lanes_of_the_enum(
    doc: str, start: str, end: str, lanes: list[str]
) -> None:
    assert quoted(between(ROOT / doc, start, end)) == lanes


def test_the_lanes_in_code_are_the_enums() -> None:
    assert list(diff.LANES) == LANES
    assert forward.LANE == Lane.OTHER
    assert Lane.OTHER not in CONVERSATION_LANES
    # a lane written as a string in code (formats/, the request log) is one of the enum's, or
    # "-": none yet (a request refused before its lane was known)
    written = {
        word
        for path in sorted((ROOT / "proxy").rglob("*.py"))
        for word in re.findall(
            r"""\blane\b["']?\)?\s*(?:==|!=|=|:)\s*["']([^"']*)["']""", path.read_text()
        )
    }
    assert written, "the pattern finds nothing: has the way lanes are written changed?"
    assert written - {"-"} <= set(LANES), written
