"""Checkpoint and resume with the real Codex CLI: a run whose root spawns a child thread with
`spawn_agent` is made once (the root's turns scripted, the child's from a stand-in model, over
Codex's WebSocket, its default), then resumed in a fresh workspace from Codex's own two rollouts
(the root's, and the child thread's, found beside it by the spawn's output) with no upstream at
all and --fence: the child's command and the root's run again, the child's turns from its own
rollout, and the verdict is `restored`; in a workspace where the first step's output differs, it
is `restart-only` at that step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.e2e.test_codex_child_agent import SCRIPT, TASK, upstream_answer
from tests.e2e.test_harnesses import harness_logs, installed
from tests.helpers.harness.recipes import CODEX_SOCKET, finished_its_own_way, make_repo, run
from tests.helpers.servers import FakeUpstream, running

pytestmark = pytest.mark.harness
__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py


def test_codex_resumes_from_its_own_rollouts_with_its_child_thread(
    proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, harness_logs: Path
) -> None:
    installed("codex", harness_logs)
    fake = FakeUpstream(fallback=upstream_answer)
    path = write_trajectory(SCRIPT, name="spawns", folder=tmp_path / "trajectories")
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", trajectory=[path]) as url:
        first = run(CODEX_SOCKET, url, tmp_path / "first", TASK)
    why = f"\n{first.tail()}"
    assert finished_its_own_way(CODEX_SOCKET, first, tmp_path / "first"), why
    rollouts = sorted(
        (tmp_path / "first" / "codex-home" / "sessions").glob("*/*/*/rollout-*.jsonl")
    )
    roots = [r for r in rollouts if '"thread_spawn"' not in r.read_text().split("\n", 1)[0]]
    assert len(rollouts) == 2 and len(roots) == 1, f"Codex wrote {rollouts}"

    with proxy(trajectory=roots, fence=True, after_script="stop") as url:
        resumed = run(CODEX_SOCKET, url, tmp_path / "again", TASK)
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{resumed.tail()}\n{json.dumps(sessions, indent=1)[:8000]}"
    assert finished_its_own_way(CODEX_SOCKET, resumed, tmp_path / "again"), why
    # the workspace rebuilt: the child's file from the child's own recorded turn, then the root's
    assert (resumed.repo / "child.txt").read_text() == "from-the-child\n", why
    assert (resumed.repo / "root.log").read_text() == "root\n", why
    [main] = [s for s in sessions if s["children"]]
    [child] = main["children"]
    assert child["live_child"] is not None and child["spawned_by"] == "call_spawn", why
    lane = next(s for s in sessions if s["session"] == child["session"])
    assert lane["turns_served"] == lane["turns_planned"] >= 2, why
    assert main["restore"]["verdict"] == "restored", why
    assert all(sum(s["forwarded"].values()) == 0 for s in sessions), why

    # a workspace that is not the recorded one: done.fifo is there already, as a plain file, so
    # the first step's mkfifo fails
    make_repo(tmp_path / "changed" / "repo")
    (tmp_path / "changed" / "repo" / "done.fifo").write_text("")
    with proxy(trajectory=roots, fence=True, after_script="stop") as url:
        changed = run(CODEX_SOCKET, url, tmp_path / "changed", TASK, again=True)
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{changed.tail()}\n{json.dumps(sessions, indent=1)[:8000]}"
    [main] = [s for s in sessions if s["children"]]
    first_mismatch = main["restore"]["first_mismatch"]
    assert main["restore"]["verdict"] == "restart-only", why
    assert first_mismatch["turn"] == 1 and "call_fifo" in first_mismatch["reason"], why
