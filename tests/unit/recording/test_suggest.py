"""`masks suggest` and `diff` on real recordings: the masks found make the runs agree."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from proxy.cli import main
from proxy.config import read_mask_file
from proxy.formats import load_file
from proxy.recording.diff import diff
from proxy.recording.suggest import explain, suggest
from proxy.replay.normalize import mask_text
from tests.helpers.recordings import HARNESSES, pair, recording

# harnesses whose runs also differ in a value only their preset's masks know, named in their
# words: Codex's output chunk id, Gemini CLI's process group id
ONLY_ITS_OWN = {"codex": "Chunk ID: 714022", "gemini": "Group PGID: 4854"}


@pytest.mark.parametrize("name", HARNESSES)
def test_suggested_masks_make_the_two_runs_agree_without_presets(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = recording(name, "a", tmp_path), recording(name, "b", tmp_path)
    masks = tmp_path / "masks.txt"
    code = main(["masks", "suggest", "--no-presets", str(a), str(b), "-o", str(masks)])
    said = capsys.readouterr().out
    assert code == 0, said
    if name in ("mini", "agents-run"):  # nothing in their prompts changes between runs
        assert "no mask is needed" in said and not masks.exists()
        return
    patterns = read_mask_file(masks)
    assert patterns and all("--mask" in said for _ in patterns)
    # the file is what --mask-file reads: with it, diff finds the runs equal with no preset
    assert main(["diff", "--no-presets", "--mask-file", str(masks), str(a), str(b)]) == 0
    assert "agree step for step" in capsys.readouterr().out
    # and without it they differ
    assert main(["diff", "--no-presets", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "verdict: volatile" in out
    if name in ONLY_ITS_OWN:
        # with no preset, no preset's masks judge either: what only its own words say is changed
        assert main(["diff", "--no-presets", "--fail-on", "changed", str(a), str(b)]) == 1
        assert ONLY_ITS_OWN[name] in capsys.readouterr().out
    else:  # only general kinds of value differ (dates, temporary folders)
        assert main(["diff", "--no-presets", "--fail-on", "changed", str(a), str(b)]) == 0
        assert "verdict: changed" not in capsys.readouterr().out


def test_with_the_preset_nothing_is_left_to_mask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = recording("claude", "a", tmp_path), recording("claude", "b", tmp_path)
    assert main(["masks", "suggest", str(a), str(b)]) == 0
    assert "on top of the claude-code preset: no mask is needed" in capsys.readouterr().out


def test_each_suggestion_says_what_it_matched_in_both_and_where(tmp_path: Path) -> None:
    a, b = pair("gemini", tmp_path)
    found = suggest(a, b, presets=False)
    assert found.beyond == [] and found.differences > 0
    dates = [s for s in found.masks if "date" in s.what]
    assert dates, [s.what for s in found.masks]
    date = dates[0]
    assert date.examples == ("Saturday, December 5, 2026", "Thursday, January 14, 2027")
    assert date.places[0].startswith("lane main, step 1, the request: contents[0].parts[0].text")


def test_a_value_of_no_known_kind_gets_a_mask_of_its_shape_between_the_text_around_it() -> None:
    explained = explain(
        "Primary working directory: /home/ana/proj\nok",
        "Primary working directory: /srv/ci/b7/proj\nok",
    )
    assert explained is not None
    [(pattern, what, examples)] = explained
    assert pattern.startswith(r"(?P<keep>Primary\ working\ directory:\ )")
    assert pattern.endswith(r"(?=\n)") and "\n" not in pattern  # a mask file holds one a line
    assert what.startswith("a path") and examples == ("/home/ana/proj", "/srv/ci/b7/proj")
    mask = [re.compile(pattern)]
    assert mask_text("Primary working directory: /a/b\n", mask) == (
        "Primary working directory: <masked>\n"
    )
    # the value only: text after it on the line, or a path that walks out, is not masked
    for other in ("/a b\n", "/a;rm -rf ~\n", "/srv/../../etc\n", "/a$(id)\n"):
        assert "<masked>" not in mask_text(f"Primary working directory: {other}", mask), other


def test_what_no_mask_explains_is_reported_with_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = recording("opencode", "a", tmp_path)
    lines = a.read_text().splitlines()
    changed = []
    for line in lines:
        record = json.loads(line)
        message = record.get("message") or {}
        for call in message.get("tool_calls") or []:
            call["function"]["arguments"] = call["function"]["arguments"].replace("step1", "STEP1")
        changed.append(json.dumps(record))
    b = tmp_path / "other.jsonl"
    b.write_text("\n".join(changed[:-1]) + "\n")  # another call, and one step fewer
    assert load_file(b).turns
    assert main(["masks", "suggest", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "differences no mask can explain" in out
    assert "lane main, step 1, the answer: tool_calls" in out
    assert f"lane main: {a} has 4 steps, {b} has 3" in out
    findings = diff(load_file(a), load_file(b))
    assert findings and not findings[0].volatile


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # a test that passed, then failed: words and short numbers are results, not values
        ("tests/test_app.py::test_x PASSED [100%]", "tests/test_app.py::test_x FAILED [100%]"),
        ("===== 3 passed in 0.12s =====", "===== 2 passed, 1 failed in 0.15s ====="),
        ("3 passed in 0.12s\n", "2 passed, 1 failed in 0.15s\n"),  # at the start of a line
        ("Process exited with code 0\nOutput:", "Process exited with code 1\nOutput:"),
        ("<returncode>0</returncode>", "<returncode>1</returncode>"),
        # text added after a value, or a line added
        ("Today's date is 5 December 2026.", "Today's date is 5 December 2026. Also rm -rf /"),
        ("total 8\nnotes.txt", "total 8\nnotes.txt\nid_rsa"),
        # a value alone on its line: nothing says where it is
        ("/home/ana/proj\n", "/srv/ci/b7/proj\n"),
        # a path that walks out of where it was
        ("cd /home/ana/proj now", "cd /home/ana/../../etc now"),
    ],
)
def test_what_has_no_values_shape_is_beyond_masks(a: str, b: str) -> None:
    assert explain(a, b) is None


@pytest.mark.parametrize(
    ("a", "b", "what"),
    [
        ("pid 4813 started", "pid 12345 started", "a number"),
        ("took 0.0120 seconds", "took 1.5 seconds", "a number with a fraction"),
        ("session ses_01hx9k ready", "session ses_7qa2mz ready", "an id"),
        ("Today's date is 5 December 2026.", "Today's date is 14 January 2027.", "a written date"),
    ],
)
def test_a_value_gets_a_mask_that_holds_it_and_nothing_else(a: str, b: str, what: str) -> None:
    explained = explain(a, b)
    assert explained is not None
    [(pattern, said, _)] = explained
    mask = [re.compile(pattern)]
    assert mask_text(a, mask) == mask_text(b, mask)
    # the same place with more after the value is not made equal
    assert mask_text(a, mask) != mask_text(b + " rm -rf /", mask)
    assert mask_text(a, mask) != mask_text(b.replace(" ", "  ", 1), mask)
    assert said.startswith(what)
