"""Checkpoint and resume with the real opencode: a run whose root runs a child session with its
`task` tool is made once against a stand-in model, both sessions exported with `opencode export`,
then resumed in a fresh workspace from those two exports with no upstream at all and --fence: the
child's command and the root's run again, the child's turns from its own export, and the verdict
is `restored`; in a workspace where the root's step shows another runs.log, `restart-only` there."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.e2e.test_harnesses import harness_logs, installed
from tests.helpers.harness.install import executable
from tests.helpers.harness.recipes import RECIPES, Run, command, make_repo, run
from tests.helpers.servers import FakeUpstream, Seen, running, text, tool_call

pytestmark = pytest.mark.harness
__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py

TASK = "Have a helper write the child line into runs.log, then add the root line."
CHILD_STEP = "echo child >> runs.log"
ROOT_STEP = "echo root >> runs.log && cat runs.log"  # its output shows the workspace
SPAWN = {
    "description": "write the child line",
    "prompt": f"Run `{CHILD_STEP}` with bash, then report back.",
    "subagent_type": "general",
}


def model(seen: Seen) -> Any:
    """The stand-in model of the recorded run."""
    history = json.dumps(seen.json.get("messages"))
    if not seen.json.get("tools"):
        return text("Child and root lines")(seen)  # the title call
    if seen.headers.get("x-parent-session-id"):  # the child session
        if "call_child_1" not in history:
            step = {"command": CHILD_STEP, "description": "child step"}
            return tool_call("bash", json.dumps(step), "call_child_1")(seen)
        return text("CHILD REPORT: the child line is written.")(seen)
    if "call_root_1" not in history:
        return tool_call("task", json.dumps(SPAWN), "call_root_1")(seen)
    if "call_root_2" not in history:
        step = {"command": ROOT_STEP, "description": "root step"}
        return tool_call("bash", json.dumps(step), "call_root_2")(seen)
    return text("All done.")(seen)


def export(first: Run, folder: Path, base: str, into: Path) -> Path:
    """Both sessions, each exported to a file named by its id; the root's path."""
    _, env = command(RECIPES["opencode"], base, folder, TASK)
    exe = str(executable("opencode"))

    def out(*args: str) -> bytes:
        done = subprocess.run(
            [exe, *args], cwd=first.repo, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, check=True,
        )  # fmt: skip
        return done.stdout

    listed = json.loads(out("session", "list", "--format", "json"))
    [root] = [s for s in listed if not s.get("parentID")]
    root_export = into / f"{root['id']}.json"
    root_export.write_bytes(out("export", root["id"]))
    task = [
        part["state"]["metadata"]["sessionId"]
        for message in json.loads(root_export.read_bytes())["messages"]
        for part in message["parts"]
        if part.get("type") == "tool" and part.get("tool") == "task"
    ]
    for child in task:
        (into / f"{child}.json").write_bytes(out("export", child))
    return root_export


def test_opencode_resumes_from_its_own_exports_with_its_child_session(
    proxy: ProxyFactory, tmp_path: Path, harness_logs: Path
) -> None:
    installed("opencode", harness_logs)
    recipe = RECIPES["opencode"]
    fake = FakeUpstream(fallback=model)
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1") as url:
        first = run(recipe, url, tmp_path / "first", TASK)
        (tmp_path / "exports").mkdir()
        root = export(first, tmp_path / "first", url, tmp_path / "exports")
    why = f"\n{first.tail()}"
    assert first.returncode == 0 and (first.repo / "runs.log").read_text() == "child\nroot\n", why
    assert len(list((tmp_path / "exports").iterdir())) == 2, why

    with proxy(trajectory=[root], fence=True, after_script="stop") as url:
        resumed = run(recipe, url, tmp_path / "again", TASK)
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{resumed.tail()}\n{json.dumps(sessions, indent=1)[:8000]}"
    assert resumed.returncode == 0, why
    assert (resumed.repo / "runs.log").read_text() == "child\nroot\n", why
    [main] = [s for s in sessions if s["children"]]
    [child] = main["children"]
    assert child["live_child"] is not None, why
    lane = next(s for s in sessions if s["session"] == child["session"])
    assert lane["turns_served"] == lane["turns_planned"] == 2, why
    assert main["restore"]["verdict"] == "restored", why
    assert all(sum(s["forwarded"].values()) == 0 for s in sessions), why

    # a workspace that is not the recorded one: runs.log holds a line already, which the root's
    # step shows
    make_repo(tmp_path / "changed" / "repo")
    (tmp_path / "changed" / "repo" / "runs.log").write_text("stale\n")
    with proxy(trajectory=[root], fence=True, after_script="stop") as url:
        changed = run(recipe, url, tmp_path / "changed", TASK, again=True)
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{changed.tail()}\n{json.dumps(sessions, indent=1)[:8000]}"
    [main] = [s for s in sessions if s["children"]]
    first_mismatch = main["restore"]["first_mismatch"]
    assert main["restore"]["verdict"] == "restart-only", why
    assert first_mismatch["turn"] == 2 and "call_root_2" in first_mismatch["reason"], why
    assert "stale" in first_mismatch["actual"], why
