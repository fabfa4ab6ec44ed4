"""The harness version pins (tests/helpers/harness/versions.py), the docs built from them, and the
parsing and reporting of `python -m tests.helpers.harness.newest` (no network here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.harness import newest
from tests.helpers.harness.versions import OVERRIDE, PINS, differs, overrides, specs, version

DOCS = Path(__file__).resolve().parents[2] / "docs" / "harnesses"
PAGES = {
    "opencode.md": "opencode",
    "mini-swe-agent.md": "mini",
    "openai-agents.md": "agents",
    "openhands.md": "openhands",
    "codex.md": "codex",
    "gemini-cli.md": "gemini",
    "claude-code.md": "claude",
}


def cell(name: str) -> str:
    """How the docs write a harness's tested versions: `package` oldest, an en dash, newest."""
    pin = PINS[name]
    packages = " + ".join(f"`{p}`" for p in pin.packages)
    span = pin.newest if not differs(name) else f"{pin.oldest}\u2013{pin.newest}"
    return f"{packages} {span}"


def test_the_docs_tested_versions_table_is_the_pins() -> None:
    text = (DOCS / "index.md").read_text()
    assert "| harness | tested versions |" in text
    cells = dict(re.findall(r"^\| \[[^]]+\]\(([\w-]+\.md)\) \| ([^|]+) \|", text, re.M))
    assert set(PAGES) <= set(cells), cells
    for page, name in PAGES.items():
        assert cells[page].strip() == cell(name), (page, "say", cell(name))


def test_each_harness_page_names_its_tested_versions() -> None:
    for page, name in PAGES.items():
        opening = (DOCS / page).read_text().split("\n\n")[1]
        assert opening.startswith("Tested with "), page
        assert PINS[name].newest in opening and PINS[name].oldest in opening, (page, opening)


def test_the_override_replaces_the_newest_pins_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDE, "claude=2.1.400, codex=0.180.0")
    assert version("claude") == "2.1.400" and version("claude", "oldest") == PINS["claude"].oldest
    assert specs("claude") == ["@anthropic-ai/claude-code@2.1.400"]
    assert version("gemini") == PINS["gemini"].newest
    monkeypatch.delenv(OVERRIDE)
    assert specs("openhands", "oldest") == [
        f"openhands-sdk=={PINS['openhands'].oldest}",
        f"openhands-tools=={PINS['openhands'].oldest}",
    ]
    assert overrides("") == {}
    for wrong in ("nope=1.0", "claude", "claude=", "claude=1.0;rm"):
        with pytest.raises(ValueError):
            overrides(wrong)


def test_the_registries_answers_are_read() -> None:
    assert newest.parse_npm("npm notice New minor version of npm!\n2.1.332\n") == "2.1.332"
    assert newest.parse_pypi('{"info": {"version": "1.60.0"}, "releases": {}}') == "1.60.0"
    answers = {"openhands-sdk": "1.60.0", "openhands-tools": "1.59.1", "opencode-ai": "1.19.0"}
    found, notes = newest.newest_versions(
        ["opencode", "openhands"], npm=answers.__getitem__, pypi=answers.__getitem__
    )
    assert found == {"opencode": "1.19.0", "openhands": "1.60.0"}
    assert len(notes) == 1 and "openhands" in notes[0]


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.e2e.test_harnesses"
 name="test_harness_replays_the_script_for_real_then_continues_live[claude]" time="9"/>
<testcase classname="tests.e2e.test_strict_presets"
 name="test_a_recorded_run_replays_strictly_elsewhere_and_later_on_presets_alone[claude]">
 <failure message="AssertionError: &#10;the request differs">details</failure></testcase>
<testcase classname="tests.e2e.test_harnesses"
 name="test_claude_code_agent_tool_spawns_a_child_whose_calls_go_upstream[claude]"/>
<testcase classname="tests.e2e.test_harnesses"
 name="test_harness_replays_the_script_for_real_then_continues_live[agents-run]"/>
<testcase classname="tests.e2e.test_harness_examples"
 name="test_the_bundled_example_replays_with_no_model_and_nothing_to_warn_about[openhands]">
 <skipped message="openhands: no Python 3.12"/></testcase>
<testcase classname="tests.e2e.test_text_based" name="test_minis_own_log_replays_whole">
 <error message="fixture failed">boom</error></testcase>
</testsuite></testsuites>
"""


def test_the_report_names_what_no_longer_replays_cleanly_per_harness() -> None:
    results = newest.outcomes(JUNIT)
    assert set(results) == {"claude", "agents", "openhands", "mini"}
    assert results["claude"].passed == 2
    assert results["claude"].failed == [
        "strict preset (test_a_recorded_run_replays_strictly_elsewhere_and_later_on_presets_alone"
        "[claude]): AssertionError: "
    ]
    assert results["mini"].failed[0].startswith("test_minis_own_log_replays_whole (")
    assert results["openhands"].skipped and not results["openhands"].passed
    pinned = {name: PINS[name].newest for name in PINS}
    text = newest.report(pinned, {"claude": "2.1.400", "agents": pinned["agents"]}, results)
    lines = text.splitlines()
    assert lines[0].split()[0] == "agents" and lines[0].endswith("clean (1 tests)")
    claude = next(line for line in lines if line.startswith("claude"))
    assert f"{pinned['claude']} -> 2.1.400" in claude and "NOT CLEAN: 1 of 3" in claude
    assert any(line.strip().startswith("no longer clean: strict preset") for line in lines)
    assert any("not run" in line for line in lines if line.startswith("openhands"))


def test_the_run_leaves_the_oldest_track_out_and_picks_harnesses_by_their_ids() -> None:
    assert newest.selection(None) == "not oldest"
    assert newest.selection(["mini", "agents"]) == (
        "([mini] or [agents- or test_text_based or test_rollout_url) and not oldest"
    )


def test_claude_codes_runs_through_vertex_and_bedrock_count_as_claude_codes() -> None:
    xml = JUNIT.replace("[agents-run]", "[claude-bedrock]")  # one more claude test, through Bedrock
    assert newest.outcomes(xml)["claude"].passed == 3
    chosen = newest.selection(["claude"])
    assert "[claude-vertex]" in chosen and "[claude-bedrock]" in chosen
