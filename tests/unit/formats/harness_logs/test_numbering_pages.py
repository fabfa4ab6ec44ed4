"""The JSONL harness-log pages (docs/harness-logs) say how `check` notes and errors number a
file's lines; held here to what the proxy prints for the published files (fixtures README): a
note's `line N` counts from 1, an error's INDEX from 0, and each page quotes the first."""

from __future__ import annotations

import json
import re

import pytest

from proxy.commands.check import describe
from proxy.errors import LoadError
from proxy.formats.harness_logs import Reader, claude_code, codex
from tests.conftest import ROOT
from tests.unit.formats.harness_logs.published import LOGS, raw, read

PAGES = [
    ("claude-code", claude_code.READER, "claude-code/session.jsonl", "assistant"),
    ("codex", codex.READER, "codex/rollout.jsonl", "response_item"),
]


@pytest.mark.parametrize(("page", "reader", "path", "model_line"), PAGES, ids=[p[0] for p in PAGES])
def test_the_page_numbers_lines_as_check_does(
    page: str, reader: Reader, path: str, model_line: str
) -> None:
    text = (ROOT / f"docs/harness-logs/{page}.md").read_text()
    t = read(reader, raw(path))
    where = t.place(t.turns[0].index)
    number = int(where.removeprefix("line "))
    lines = (LOGS / path).read_text().splitlines()
    # the note's line counts from 1: line N is the turn's first line, the one before is not the model's
    assert json.loads(lines[number - 1])["type"] == model_line
    assert json.loads(lines[number - 2])["type"] != model_line
    # the page quotes what check prints, and says how it counts
    quoted = f"turn 1 ({where})"
    assert quoted in describe(t) and f"`{quoted}`" in text
    assert "0-based line numbers" not in text
    # an error names the same line by its 0-based index, as the page says
    broken = [*lines[: number - 1], "{not json", *lines[number:]]
    with pytest.raises(LoadError) as caught:
        read(reader, "\n".join(broken).encode() + b"\n")
    assert caught.value.index == number - 1
    name = path.rsplit("/", 1)[1]
    assert re.search(rf"`{re.escape(name)}:{number - 1}: \.\.\.`", text)
