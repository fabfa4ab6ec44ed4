"""The bundled example of each harness's tool schema (examples/harnesses/), replayed by the real
harness as its page's recipe says, with no model: every command runs for real, the run ends when
the script does (--after-script stop), and the proxy has nothing to warn about.

The examples' tool results are what each harness itself sent back for those commands (captured
from a run of the harness on 2026-12-06), so a clean replay finds them the same, up to the values
the harness's preset masks (Codex's chunk id and wall time, Gemini CLI's process group).
mini-swe-agent's example ends with its submit command and OpenHands' with its finish tool, as
each ends a run; OpenHands states its working directory in every output, masked in each output by
its own (its preset).
opencode also asks for a title, a tool-less side call that never takes a turn: it goes to the
upstream, as its page says, so its run has one (a stand-in for the real model here).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, ProxyFactory
from tests.e2e.test_harnesses import installed, live_answer
from tests.helpers.harness.recipes import RECIPES, install_name, run
from tests.helpers.servers import FakeUpstream, running

pytestmark = pytest.mark.harness

EXAMPLES = {
    "codex": "codex",
    "claude": "claude-code",
    "gemini": "gemini-cli",
    "opencode": "opencode",
    "mini": "mini-swe-agent",
    "openhands": "openhands",
}
TASK = (
    "Create a small Python greeting script in greet.py that prints 'hello, world', run it, and "
    "save its output to out.txt."
)


@pytest.fixture(scope="session")
def harness_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("example-installs")


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_the_bundled_example_replays_with_no_model_and_nothing_to_warn_about(
    name: str,
    proxy: ProxyFactory,
    tmp_path: Path,
    harness_logs: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    recipe = RECIPES[name]
    installed(install_name(name), harness_logs)
    example = ROOT / "examples" / "harnesses" / f"{EXAMPLES[name]}.json"
    caplog.set_level(logging.INFO)
    fake = FakeUpstream(fallback=live_answer(recipe))
    with running(fake.app) as upstream:
        live = {"upstream": upstream + "/v1"} if name == "opencode" else {}
        with proxy(trajectory=[example], after_script="stop", **live) as url:
            result = run(recipe, url, tmp_path / "run", TASK)
            sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{result.tail()}"
    assert result.returncode == 0, why
    assert (result.repo / "out.txt").read_text() == "hello, world\n", why
    [main] = [s for s in sessions if s["script"] is not None]
    # mini-swe-agent's and OpenHands' examples end with their own way out, a fourth turn
    ends_itself = name in ("mini", "openhands")
    turns = 4 if ends_itself else 3
    assert main["turns_served"] == turns and main["divergences"] == 0, main
    assert main["observations"]["differing"] == 0, main["observations"]
    assert main["phase"] == ("served" if ends_itself else "stopped"), main
    assert main["errors"] == 0, main
    # the replay's verdict, as a CI check reads it (docs/record-strict-diff.md): the results of
    # a run's own way out never come back, and are not due
    assert main["divergences"] == 0 and main["complete"], main["incomplete"]
    assert main["tool_results"]["not_due"] == (["call_greet_4"] if ends_itself else []), main
    warned: list[Any] = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("proxy")
    ]
    assert warned == [], warned
    assert all(not r.json.get("tools") for r in fake.requests)  # side calls only, if any
