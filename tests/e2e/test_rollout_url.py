"""A real harness given nothing but a base URL per rollout: /s/{rollout}/t/{trajectory}/v1.

mini-swe-agent (its config takes an api_base and a key, nothing else) replays the recorded steps
for real, then its live calls reach a gateway stand-in under the rollout's own id
(--upstream 'http://gateway/sessions/{session}/v1'). A template that cannot work stops start-up
saying why, with its flag (or environment variable) named once.

The harness run is marked `harness`: `pytest -m "not harness"` skips it locally; .ci/run runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, ProxyFactory
from tests.e2e.test_cli import run as run_cli
from tests.e2e.test_harnesses import TASK, harness_logs, installed, live_answer, trajectory
from tests.helpers.harness.recipes import RECIPES, assert_rebuilt, finished_its_own_way, run
from tests.helpers.servers import FakeUpstream, running

__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py


@pytest.mark.harness
def test_a_harness_with_only_a_base_url_replays_then_reaches_the_gateway_as_its_rollout(
    proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, harness_logs: Path
) -> None:
    recipe = RECIPES["mini"]
    installed("mini", harness_logs)
    fake = FakeUpstream(fallback=live_answer(recipe))
    decoy = write_trajectory(trajectory(RECIPES["opencode"]), name="decoy", folder=tmp_path / "t")
    wanted = write_trajectory(trajectory(recipe), name="recorded", folder=tmp_path / "t")
    with running(fake.app) as gateway:
        template = gateway + "/sessions/{session}/v1"
        with proxy(upstream=template, trajectory=[decoy, wanted]) as url:
            base = url.removesuffix("/v1") + "/s/rollout-42/t/recorded/v1"
            result = run(recipe, base, tmp_path / "run", TASK)
            found = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    why = f"\n{result.tail()}\nsessions: {found}"
    assert finished_its_own_way(recipe, result, tmp_path / "run"), why
    assert_rebuilt(result.repo, why)
    [session] = found
    assert session["session"] == "rollout-42" and session["script"]["name"] == "recorded", why
    assert session["turns_served"] == 3 and session["phase"] == "live", why
    assert session["live_upstream"] == gateway + "/sessions/rollout-42/v1", why
    live = [r.path for r in fake.requests]
    assert live and set(live) == {"/sessions/rollout-42/v1/chat/completions"}, why


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (
            ("--upstream", "http://gw/{rollout}/v1"),
            {},
            "--upstream: 'http://gw/{rollout}/v1': {rollout} is not a field; the fields are "
            "{session}, {trajectory}, {handoff_turn}, {restore}",
        ),
        (
            ("--upstream", "http://gw/{session/v1"),
            {},
            "--upstream: 'http://gw/{session/v1': a brace that opens no field ({session}, "
            "{trajectory}, {handoff_turn}, {restore})",
        ),
        (
            ("--upstream", "http://{session}.gw/v1"),
            {},
            "--upstream: 'http://{session}.gw/v1': fields like {session} may stand in its path or "
            "query only, never in its host: a session must not choose where its calls go",
        ),
        (
            ("--upstream", "http://gw/v1", "--upstream-header", "no colon"),
            {},
            "--upstream-header: 'no colon': expected 'Name: value'",
        ),
        (
            ("--upstream", "http://gw/v1", "--upstream-header", "X-Id: a\tb"),
            {},
            "--upstream-header: 'X-Id: a\\tb': the value holds a control character",
        ),
        (
            ("--upstream", "http://gw/v1", "--upstream-header", "X-Id: {sid}"),
            {},
            "--upstream-header: 'X-Id: {sid}': {sid} is not a field; the fields are {session}, "
            "{trajectory}, {handoff_turn}, {restore}",
        ),
        (
            (),
            {"REPLAY_PROXY_UPSTREAM": "http://gw/{rollout}/v1"},
            "REPLAY_PROXY_UPSTREAM: 'http://gw/{rollout}/v1': {rollout} is not a field; the "
            "fields are {session}, {trajectory}, {handoff_turn}, {restore}",
        ),
    ],
)
def test_a_bad_template_stops_start_up_naming_its_flag_once(
    args: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    # serve.py names the flag (or the variable); the template's own words name the value only
    stopped = run_cli("serve", "--port", "0", *args, env=env)
    assert stopped.returncode == 2
    assert stopped.stderr.splitlines() == [f"replay-proxy: {says}"]


def test_a_trajectory_whose_name_cannot_fill_the_template_stops_start_up(tmp_path: Path) -> None:
    """Its every live call would be a 400: said once, at start."""
    spaced = tmp_path / "my run.json"
    spaced.write_text((ROOT / "examples" / "greeting.json").read_text())
    upstream = "http://127.0.0.1:9/rollouts/{trajectory}/v1"
    stopped = run_cli("serve", "--port", "0", "--trajectory", str(spaced), "--upstream", upstream)
    assert stopped.returncode == 2
    assert "its name 'my run' fills {trajectory} in the upstream" in stopped.stderr
