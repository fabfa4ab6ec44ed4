"""Codex CLI and opencode on their built-in OpenAI providers, which speak Responses over a
WebSocket: the scripted turns rebuild the workspace over the socket, then the run goes live, and
neither harness reconnects or falls back to HTTP. opencode's title call still goes over HTTP and
takes no turn."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.e2e.test_harnesses import (
    TASK,
    VIEWS,
    call_id,
    harness_logs,
    installed,
    live_answer,
    trajectory,
)
from tests.helpers.harness.recipes import (
    CODEX_SOCKET,
    OPENCODE_SOCKET,
    Recipe,
    assert_rebuilt,
    finished_its_own_way,
    install_name,
    run,
)
from tests.helpers.servers import FakeUpstream, running

pytestmark = pytest.mark.harness
__all__ = ["harness_logs"]  # the fixture, shared with test_harnesses.py

# what each harness prints when its socket fails: a reconnect, or the switch to HTTP
FELL_BACK = re.compile(
    r"Reconnecting|Falling back from WebSockets|failed to connect", re.IGNORECASE
)


@pytest.mark.parametrize("recipe", [CODEX_SOCKET, OPENCODE_SOCKET], ids=lambda r: r.name)
def test_a_built_in_provider_replays_over_its_websocket_then_goes_live(
    recipe: Recipe, proxy: ProxyFactory, tmp_path: Path, write_trajectory: Any, harness_logs: Path
) -> None:
    installed(install_name(recipe.name), harness_logs)
    fake = FakeUpstream(fallback=live_answer(recipe))
    path = write_trajectory(trajectory(recipe), name="recorded", folder=tmp_path / "trajectories")
    records = tmp_path / "records"
    with (
        running(fake.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[path], record_dir=records) as url,
    ):
        result = run(recipe, url, tmp_path / "run", TASK)
        root = url.removesuffix("/v1")
        sessions = httpx.get(root + "/replay/sessions").json()["data"]
        metrics = httpx.get(root + "/metrics").text
    why = f"\n{result.tail()}\nupstream saw {len(fake.requests)} requests"
    assert finished_its_own_way(recipe, result, tmp_path / "run"), f"exit {result.returncode}{why}"
    assert_rebuilt(result.repo, why)
    logs = "".join(
        (result.logs / n).read_text(errors="replace") for n in ("stdout.log", "stderr.log")
    )
    assert not FELL_BACK.search(logs), why

    [main] = [s for s in sessions if s["script"] is not None]
    assert main["turns_served"] == 3 and main["divergences"] == 0, main
    assert main["phase"] == "live" and main["complete"], main
    # every turn of the main lane came over a socket, and the proxy counted the sockets
    opened = re.search(r'replay_proxy_websockets_total\{event="opened"\} (\d+)', metrics)
    assert opened and int(opened.group(1)) >= 1, metrics
    (recording,) = records.glob("*.jsonl")
    lines = [json.loads(x) for x in recording.read_text().splitlines()]
    turns = [x for x in lines if x.get("type") == "exchange" and x["lane"] == "main"]
    assert [x["source"] for x in turns] == ["scripted"] * 3 + ["upstream"], turns
    assert {x.get("extra", {}).get("transport") for x in turns} == {"websocket"}
    # the live call went upstream (over HTTP) with the whole conversation the socket built
    live = [r for r in fake.posts("/v1/responses") if r.json.get("tools")]
    assert live, why
    calls, results, splice_ok = VIEWS["responses"](live[0].json)
    assert calls[:3] == [call_id(k) for k in range(3)], calls
    assert all(len(results[call_id(k)]) == 1 for k in range(3)) and splice_ok
    assert "previous_response_id" not in live[0].json
    if recipe is OPENCODE_SOCKET:  # its title call: over HTTP, upstream, no turn taken
        assert main["forwarded"]["toolless"] >= 1, main
