"""The compatibility corpus (tests/fixtures/corpus): published files of many producers, pinned by
commit (manifest.json, README.md). Each loads as the run an independent reading of its raw data
gives (tests/helpers/independent.py): the same model calls, in order, with the same tool-call ids
(a call recorded without an id gets a made-up one, counted but not compared); each shape refused
on purpose is refused with its reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.commands.check import misread
from proxy.errors import LoadError
from proxy.formats import load_all
from tests.conftest import ROOT
from tests.helpers.independent import READINGS

CORPUS = ROOT / "tests/fixtures/corpus"
MANIFEST: list[dict[str, Any]] = json.loads((CORPUS / "manifest.json").read_text())


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"] for e in MANIFEST])
def test_every_published_file_loads_as_the_run_it_records(entry: dict[str, Any]) -> None:
    path = CORPUS / entry["file"]
    if "refused" in entry:
        with pytest.raises(LoadError) as caught:
            load_all(path)
        assert entry["refused"] in caught.value.reason
        return
    expected = READINGS[entry["reading"]](path)
    loaded = load_all(path)
    assert len(loaded) == len(expected)
    for trajectory, steps in zip(loaded, expected, strict=True):
        got = [[c.id for c in turn.tool_calls] for turn in trajectory.turns]
        assert len(got) == len(steps), trajectory.name
        for mine, theirs in zip(got, steps, strict=True):
            assert len(mine) == len(theirs)
            assert [a for a, b in zip(mine, theirs, strict=True) if b is not None] == [
                b for b in theirs if b is not None
            ]
        assert misread(trajectory) is None, trajectory.name


def test_the_manifest_names_a_source_for_every_file_in_the_corpus() -> None:
    files = {
        str(p.relative_to(CORPUS))
        for p in CORPUS.rglob("*")
        if p.is_file() and p.name not in ("manifest.json", "README.md")
    }
    assert files == {e["file"] for e in MANIFEST}
    for entry in MANIFEST:
        assert len(entry["commit"]) == 40 and entry["repository"] and entry["path"]
        assert ("reading" in entry) != ("refused" in entry)
    readme = (CORPUS / "README.md").read_text()
    assert all(entry["file"] in readme for entry in MANIFEST)
