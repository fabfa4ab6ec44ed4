"""Real harnesses served turns that carry NeMo-Gym's token fields: each one's parser takes the
answers with `prompt_token_ids`, `generation_token_ids` and `generation_log_probs` on them (on the
Chat Completions message, on the Responses item that ends the call, over HTTP and over the
Responses WebSocket), runs the recorded steps for real and goes live as without them; the
session's rollout, exported from the admin API, holds each replayed call's ids, and the live
call's none, as its stand-in upstream returned none. The live calls reach the upstream without
the fields, whether the harness sent them back or not.

Marked `harness`: `pytest -m "not harness"` skips it locally; .ci/run runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.e2e.test_harnesses import TASK, harness_logs, installed, live_answer, trajectory
from tests.helpers.harness.recipes import (
    CODEX_SOCKET,
    OPENCODE_SOCKET,
    RECIPES,
    Recipe,
    assert_rebuilt,
    finished_its_own_way,
    install_name,
    run,
)
from tests.helpers.servers import FakeUpstream, running

pytestmark = pytest.mark.harness
__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py

FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")


def tokens(k: int) -> dict[str, Any]:
    """Call k's token fields, as NeMo-Gym records them (ids made for the test: the harness
    reads them as it reads any answer, and the export must give back these)."""
    generated = [9000 + 10 * k + i for i in range(4)]
    return {
        "prompt_token_ids": list(range(100 + 50 * k)),
        "generation_token_ids": generated,
        "generation_log_probs": [-0.5 / (i + 1) for i in range(4)],
    }


def with_tokens(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = iter(range(100))
    return [{**m, **tokens(next(calls))} if m["role"] == "assistant" else m for m in messages]


RECIPES_SPOKEN = [RECIPES["opencode"], RECIPES["mini"], RECIPES["codex"], CODEX_SOCKET,
                  OPENCODE_SOCKET]  # fmt: skip


@pytest.mark.parametrize("recipe", RECIPES_SPOKEN, ids=lambda r: r.name)
def test_a_harness_served_turns_with_token_ids_replays_and_the_rollout_keeps_them(
    recipe: Recipe, proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, harness_logs: Path
) -> None:
    installed(install_name(recipe.name), harness_logs)
    fake = FakeUpstream(fallback=live_answer(recipe))
    script = with_tokens(trajectory(recipe))
    path = write_trajectory(script, name="recorded", folder=tmp_path / "trajectories")
    with (
        running(fake.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[path], record_dir=tmp_path / "rec") as url,
    ):
        result = run(recipe, url, tmp_path / "run", TASK)
        root = url.removesuffix("/v1")
        sessions = httpx.get(root + "/replay/sessions").json()["data"]
        [main] = [s for s in sessions if s["script"] is not None]
        rollout = httpx.get(f"{root}/replay/sessions/{main['session']}/rollout")
    why = f"\n{result.tail()}\nupstream saw {len(fake.requests)} requests"
    assert finished_its_own_way(recipe, result, tmp_path / "run"), f"exit {result.returncode}{why}"
    assert_rebuilt(result.repo, why)
    assert main["turns_served"] == 3 and main["divergences"] == 0, main
    assert main["phase"] == "live", main
    # what a harness sent back of them (mini-swe-agent does; so does the conversation kept for
    # Codex's socket) was taken out: the stand-in upstream is no token-in server
    live = [r for r in fake.requests if r.method == "POST" and b'"tools"' in r.body]
    assert live, why
    assert not any(f.encode() in r.body for r in live for f in FIELDS), why

    assert rollout.status_code == 200, rollout.text
    output = rollout.json()["response"]["output"]
    ends = [o for o in output if o.get("type") in ("message", "function_call")]
    carried = [{f: o[f] for f in FIELDS} for o in ends if "generation_token_ids" in o]
    assert carried == [tokens(k) for k in range(3)], why
    calls = [o["call_id"] for o in output if o.get("type") == "function_call"]
    assert calls[:3] == [m["tool_calls"][0]["id"] for m in script if m.get("tool_calls")]
