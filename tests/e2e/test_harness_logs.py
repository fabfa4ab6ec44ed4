"""A real harness's own log of a run replays in the same harness.

Per harness: a run whose model is the proxy serving the test's three-step script, then the fake
upstream ending it the harness's own way (as in test_harnesses.py); the harness logs that run its
own way (opencode's `export`, Claude Code's transcript, Codex's rollout, mini-swe-agent's
trajectory, the OpenHands SDK's event store). That log, loaded as a trajectory, then drives the
same harness in a fresh repository: every step runs again for real, and the model is asked for
nothing but side calls.

Marked `harness`: `pytest -m "not harness"` skips them locally; .ci/run runs them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.formats import load_all
from tests.conftest import ProxyFactory
from tests.e2e.test_harnesses import TASK, harness_logs, installed, live_answer, trajectory
from tests.helpers.harness.install import executable
from tests.helpers.harness.recipes import RECIPES, Run, assert_rebuilt, command, run
from tests.helpers.servers import FakeUpstream, running

pytestmark = pytest.mark.harness

__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py


def opencode_export(result: Run, folder: Path, base: str) -> Path:
    """opencode keeps sessions in its own database: `opencode export <id>` prints one as JSON
    (and "Exporting session: ..." on stderr, kept apart)."""
    _, env = command(RECIPES["opencode"], base, folder, TASK)
    exe = str(executable("opencode"))
    listed = subprocess.run(
        [exe, "session", "list", "--format", "json"],
        cwd=result.repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    [session] = json.loads(listed.stdout)
    exported = subprocess.run(
        [exe, "export", session["id"]],
        cwd=result.repo, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True,
    )  # fmt: skip
    path = folder / "own-log.json"
    path.write_bytes(exported.stdout)
    return path


def one(paths: list[Path], what: str) -> Path:
    assert len(paths) == 1, f"{what}: {paths}"
    return paths[0]


LOGS: dict[str, Callable[[Run, Path, str], Path]] = {
    "opencode": opencode_export,
    "claude": lambda r, f, b: one(
        sorted((f / "home/.claude/projects").glob("*/*.jsonl")), "Claude Code transcripts"
    ),
    "codex": lambda r, f, b: one(
        sorted((f / "codex-home/sessions").glob("*/*/*/rollout-*.jsonl")), "Codex rollouts"
    ),
    "mini": lambda r, f, b: f / "traj.json",
    "openhands": lambda r, f, b: one(
        sorted(p for p in (f / "conversations").iterdir() if p.is_dir()), "OpenHands stores"
    ),
}
FORMATS = {
    "opencode": "opencode",
    "claude": "claude-code",
    "codex": "codex",
    "mini": "mini-swe-agent",
    "openhands": "openhands",
}


def tool_bearing(fake: FakeUpstream) -> list[Any]:
    return [r for r in fake.requests if r.method == "POST" and r.json.get("tools")]


@pytest.mark.parametrize("name", list(LOGS))
def test_a_harness_replays_its_own_log(
    name: str, proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, harness_logs: Path
) -> None:
    recipe = RECIPES[name]
    installed(name, harness_logs)
    script = write_trajectory(trajectory(recipe), name="script", folder=tmp_path / "script")

    # 1. a run the harness logs its own way
    first_upstream = FakeUpstream(fallback=live_answer(recipe))
    with (
        running(first_upstream.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[script]) as url,
    ):
        first = run(recipe, url, tmp_path / "first", TASK)
        log = LOGS[name](first, tmp_path / "first", url)
    assert first.returncode == 0, first.tail()
    [loaded] = load_all(log)
    assert loaded.format == FORMATS[name]
    calls = [c.id for t in loaded.turns for c in t.tool_calls]
    assert calls[:3] == ["call_rec_1", "call_rec_2", "call_rec_3"], calls

    # 2. that log drives the harness in a fresh repository
    fake = FakeUpstream(fallback=live_answer(recipe))
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", trajectory=[log]) as url:
        second = run(recipe, url, tmp_path / "second", TASK)
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{second.tail()}\nthe model was asked {len(tool_bearing(fake))} times"
    assert second.returncode == 0, why
    assert_rebuilt(second.repo, why)
    assert tool_bearing(fake) == [], why  # every turn, the run's end included, came from the log
    [main] = [s for s in sessions if s["script"] is not None]
    assert main["turns_served"] == len(loaded.turns) and main["divergences"] == 0, main
    assert main["complete"], main
