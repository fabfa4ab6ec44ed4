"""Checkpoint and resume with the real Claude Code: a run whose root spawns a child with its `Agent`
tool is made once against a stand-in model (through the proxy, recorded), then resumed in a fresh
workspace from Claude Code's own transcript files (the session's and its child's) with no upstream
at all and --fence: the root's and the child's recorded turns rebuild the workspace, the child's
from its own transcript, and the verdict is `restored`; with one tool's output changed by the
workspace, the verdict is `restart-only` at that step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.e2e.test_harnesses import harness_logs, installed, tracks
from tests.helpers.harness.recipes import RECIPES, Run, make_repo, run
from tests.helpers.servers import FakeUpstream, Seen, anthropic_text, anthropic_tool_use, running

pytestmark = pytest.mark.harness
__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py

TASK = "Have a helper count the repository's files into runs.log, then add the root line."
CHILD_STEP = "echo child >> runs.log"
# its output depends on the workspace: a runs.log that was not the recorded one shows here
ROOT_STEP = "echo root >> runs.log && cat runs.log"
AGENT_ID = "x-claude-code-agent-id"
CHILD_REPORT = "CHILD REPORT: the child line is written."
SPAWN = {
    "description": "Write the child line",
    "prompt": f"Run `{CHILD_STEP}` with Bash, then report back.",
    "subagent_type": "general-purpose",
    "run_in_background": False,  # 2.1.332 runs agents in the background by default
}


def model(seen: Seen) -> Any:
    """The stand-in model of the recorded run: the root spawns the child, then runs its own step
    and ends; the child runs its step and reports; side calls get a title."""
    messages = json.dumps(seen.json.get("messages"))
    if not seen.json.get("tools"):
        return anthropic_text("Child and root lines")(seen)
    if AGENT_ID in seen.headers:
        if "tool_result" not in messages:
            step = {"command": CHILD_STEP, "description": "child step"}
            return anthropic_tool_use("Bash", step, "toolu_child_1")(seen)
        return anthropic_text(CHILD_REPORT)(seen)
    if "toolu_root_1" not in messages:
        return anthropic_tool_use("Agent", SPAWN, "toolu_root_1")(seen)
    if "toolu_root_2" not in messages:
        step = {"command": ROOT_STEP, "description": "root step"}
        return anthropic_tool_use("Bash", step, "toolu_root_2")(seen)
    return anthropic_text("All done.")(seen)


def transcript(first: Run) -> Path:
    """The session file Claude Code wrote for the run, with its child's beside it."""
    projects = first.repo.parent / "home" / ".claude" / "projects"
    [session] = [p for p in projects.glob("*/*.jsonl")]
    children = list((session.parent / session.stem / "subagents").glob("agent-*.jsonl"))
    assert len(children) == 1, f"Claude Code kept {children} as the child's transcript"
    return session


def resume(
    proxy: ProxyFactory, session: Path, folder: Path, track: str, *, before: str | None = None
) -> tuple[Run, dict[str, Any], list[dict[str, Any]]]:
    """Run Claude Code again in a fresh workspace against the transcript, no upstream, fenced;
    `before`: what runs.log holds before the run (a workspace that is not the recorded one)."""
    settings = {"trajectory": [session], "fence": True, "after_script": "stop"}
    if before is not None:  # the workspace made first, as run() would, then changed
        make_repo(folder / "repo")
        (folder / "repo" / "runs.log").write_text(before)
    with proxy(**settings) as url:
        root = url.removesuffix("/v1")
        resumed = run(
            RECIPES["claude"], url, folder, TASK, extra_args=["Agent"], track=track,
            again=before is not None,  # the workspace is there already: run() keeps it
        )  # fmt: skip
        sessions = httpx.get(f"{root}/replay/sessions").json()["data"]
    [main] = [s for s in sessions if s["script"] and s["script"]["name"] == session.stem]
    return resumed, main, sessions


@pytest.mark.parametrize("track", [pytest.param(p.values[1], id=p.id) for p in tracks(["claude"])])
def test_claude_code_resumes_from_its_own_transcripts_with_its_child(
    track: str, proxy: ProxyFactory, tmp_path: Path, harness_logs: Path
) -> None:
    installed("claude", harness_logs, track)
    fake = FakeUpstream(fallback=model)
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1") as url:
        first = run(
            RECIPES["claude"], url, tmp_path / "first", TASK, extra_args=["Agent"], track=track
        )
    why = f"\n{first.tail()}"
    assert first.returncode == 0, why
    assert (first.repo / "runs.log").read_text() == "child\nroot\n", why
    session = transcript(first)

    resumed, main, sessions = resume(proxy, session, tmp_path / "again", track)
    why = f"\n{resumed.tail()}\n{json.dumps(sessions, indent=1)[:6000]}"
    assert resumed.returncode == 0, why
    # the workspace rebuilt, the child's line included, by the recorded calls run for real
    assert (resumed.repo / "runs.log").read_text() == "child\nroot\n", why
    assert main["restore"]["verdict"] == "restored", why
    [child] = main["children"]
    assert child["live_child"] is not None, why
    lane = next(s for s in sessions if s["session"] == child["session"])
    assert lane["turns_served"] == lane["turns_planned"] == 2, why
    # nothing was forwarded: there is no upstream; the fence refused what the files do not hold
    assert all(sum(s["forwarded"].values()) == 0 for s in sessions), why

    changed, main, sessions = resume(proxy, session, tmp_path / "changed", track, before="stale\n")
    why = f"\n{changed.tail()}\n{json.dumps(sessions, indent=1)[:6000]}"
    first_mismatch = main["restore"]["first_mismatch"]
    assert main["restore"]["verdict"] == "restart-only", why
    assert first_mismatch["turn"] == 2 and "toolu_root_2" in first_mismatch["reason"], why
    assert "stale" in first_mismatch["actual"], why
