"""Strict replay of a real harness's recording passes on its preset alone, elsewhere and later.

Per harness: the run of test_harnesses.py (three scripted turns, then the fake upstream ends it)
is recorded with --record-dir. It is then replayed with --mode strict, no upstream and no --mask,
in another folder (another working directory, HOME and TMPDIR) and 40 days later (libfaketime;
not Codex, whose static binary it cannot reach): every request must equal the recorded one once
the harness's preset is applied. A run with another task must still fail, classed `changed`.

Marked `harness`: `pytest -m "not harness"` skips them locally; .ci/run runs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.formats import load_file
from tests.conftest import ProxyFactory
from tests.e2e.test_harnesses import TASK, harness_logs, installed, live_answer, trajectory
from tests.helpers.harness.recipes import (
    CODEX_SOCKET,
    OPENCODE_SOCKET,
    RECIPES,
    assert_rebuilt,
    finished_its_own_way,
    install_name,
    run,
)
from tests.helpers.servers import FakeUpstream, running

pytestmark = pytest.mark.harness

__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py

PRESET = {
    "opencode": "opencode",
    "mini": "mini-swe-agent",
    "agents-run": "openai-agents",
    "agents-streamed": "openai-agents",
    "codex": "codex",
    "claude": "claude-code",
    "claude-vertex": "claude-code",
    "claude-bedrock": "claude-code",
    "gemini": "gemini-cli",
    "openhands": "openhands",
    "codex-ws": "codex",  # recorded over their WebSocket, replayed over it
    "opencode-ws": "opencode",
}
ALL = {**RECIPES, CODEX_SOCKET.name: CODEX_SOCKET, OPENCODE_SOCKET.name: OPENCODE_SOCKET}
LATER = "+40d"
OTHER_TASK = "Set up the farewell files in this repository."


def sessions(url: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()[
        "data"
    ]
    return data


@pytest.mark.parametrize("name", list(ALL))
def test_a_recorded_run_replays_strictly_elsewhere_and_later_on_presets_alone(
    name: str, proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, harness_logs: Path
) -> None:
    recipe = ALL[name]
    installed(install_name(name), harness_logs)
    fake = FakeUpstream(fallback=live_answer(recipe))
    path = write_trajectory(trajectory(recipe), name="scripted", folder=tmp_path / "trajectories")
    records = tmp_path / "recordings"
    with (
        running(fake.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[path], record_dir=records) as url,
    ):
        first = run(recipe, url, tmp_path / "first", TASK)
    assert finished_its_own_way(recipe, first, tmp_path / "first"), first.tail()
    [recording] = [p for p in records.glob("*.jsonl") if load_file(p).turns]

    clock = None if name.startswith("codex") else LATER
    elsewhere = tmp_path / "elsewhere" / "a" / "deeper" / "folder"
    with proxy(trajectory=[recording], mode="strict") as url:
        again = run(recipe, url, elsewhere, TASK, clock=clock)
        replayed = sessions(url)
    why = f"\n{again.tail()}\nsessions: {replayed}"
    assert finished_its_own_way(recipe, again, elsewhere), why
    assert_rebuilt(again.repo, why)
    [main] = [s for s in replayed if s["script"] is not None]
    assert main["preset"] == PRESET[name], why
    assert main["divergences"] == 0 and main["phase"] == "served", why
    assert main["complete"], why
    assert main["turns_served"] == main["turns_planned"] == 4, why  # 3 scripted, 1 live: recorded
    assert main["forwarded"] == {"main": 0, "toolless": 0, "subagent": 0}, why

    # another task is another run: it fails at once, and no preset hides it (not run for
    # opencode-ws: over its socket opencode retries an error for about 70 s before it gives up;
    # the same refusal over a socket is codex-ws's, and over HTTP opencode's)
    if name == "opencode-ws":
        return
    with proxy(trajectory=[recording], mode="strict") as url:
        other = run(recipe, url, tmp_path / "other", OTHER_TASK, clock=clock)
        refused = sessions(url)
    why = f"\n{other.tail()}\nsessions: {refused}"
    assert not finished_its_own_way(recipe, other, tmp_path / "other"), why
    assert not (other.repo / "runs.log").exists(), why
    [main] = [s for s in refused if s["script"] is not None]
    divergence = main["divergence"]
    assert divergence is not None and divergence["verdict"] == "changed", why
    assert divergence["kind"] == "request" and divergence["turn"] == 1, why
    assert "farewell" in divergence["actual"] and "greeting" in divergence["expected"], why
