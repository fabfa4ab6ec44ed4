"""Resuming a run and proving it, over real sockets with the openai SDK as the harness: the restore
verdict at the hand-off (status, headers both ways, --upstream-header fields, metrics, a blocking
read), --require-restored, and --fence before the hand-off (refused, or answered from a recording
of the same run)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.agent import RECORDED, TOOLS, agent_step, client, follow, start_messages
from tests.helpers.servers import FakeUpstream, running, text, tool_call

OUTPUTS = {"call_A": "", "call_B": "notes.txt"}  # what RECORDED's calls returned


def recorded_output(call: dict[str, Any]) -> str:
    return OUTPUTS[call["id"]]


def run(c: openai.OpenAI, output: Callable[[dict[str, Any]], str | None]) -> tuple[Any, Any]:
    """The agent loop until its first answer without tool calls; (that message, its headers)."""
    messages = start_messages()
    while True:
        message, headers = agent_step(c, messages, stream=False)
        if not message["tool_calls"]:
            return message, headers
        follow(messages, message, output)


def test_a_faithful_resume_is_restored_and_says_so_at_the_hand_off(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    fake.then(text("Live now."))
    path = write_trajectory(RECORDED, name="run")
    with (
        proxy(
            upstream=upstream_url,
            trajectory=[path],
            upstream_header=("x-cut: {session} after {handoff_turn}: {restore}",),
        ) as url,
        ThreadPoolExecutor(1) as pool,
    ):
        root = url.removesuffix("/v1")
        # the runner blocks on the verdict before the harness has even started
        waiting = pool.submit(
            httpx.get, f"{root}/replay/sessions/rollout-1/restore?wait=120", timeout=150
        )
        message, headers = run(client(f"{root}/s/rollout-1/v1"), recorded_output)
        verdict = waiting.result().json()
        status = httpx.get(f"{root}/replay/sessions/rollout-1").json()
        metrics = httpx.get(f"{root}/metrics").text
    assert message["content"] == "Live now."
    assert headers["x-replay-restore"] == "restored" and headers["x-replay-handoff-turn"] == "2"
    [live] = fake.requests
    assert live.headers["x-replay-restore"] == "restored"
    assert live.headers["x-replay-handoff-turn"] == "2"
    assert live.headers["x-cut"] == "rollout-1 after 2: restored"
    assert verdict["settled"] is True and verdict["verdict"] == "restored", verdict
    assert verdict["handoff_turn"] == 2 and verdict["calls"] == 2
    assert verdict["first_mismatch"] is None
    assert status["restore"]["verdict"] == "restored"
    assert 'replay_proxy_restores_total{verdict="restored"} 1.0' in metrics


def test_a_changed_tool_result_makes_the_session_restart_only_at_its_step(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    fake.then(text("Live now."))
    path = write_trajectory(RECORDED, name="run")

    def changed(call: dict[str, Any]) -> str:
        return (
            "touch: cannot touch 'notes.txt': Permission denied"
            if call["id"] == "call_A"
            else recorded_output(call)
        )

    with proxy(upstream=upstream_url, trajectory=[path]) as url:
        root = url.removesuffix("/v1")
        _, headers = run(client(f"{root}/s/rollout-2/v1"), changed)
        verdict = httpx.get(f"{root}/replay/sessions/rollout-2/restore").json()
        metrics = httpx.get(f"{root}/metrics").text
    assert headers["x-replay-restore"] == "restart-only"
    assert fake.requests[0].headers["x-replay-restore"] == "restart-only"
    first = verdict["first_mismatch"]
    assert verdict["verdict"] == "restart-only" and first["turn"] == 1, verdict
    assert first["path"] == "messages[3].content" and "call_A" in first["reason"]
    assert first["expected"].startswith('""') and "cannot touch" in first["actual"]
    assert 'replay_proxy_restores_total{verdict="restart-only"} 1.0' in metrics


def test_require_restored_refuses_the_hand_off_and_keeps_the_session(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    path = write_trajectory(RECORDED, name="run")

    def changed(call: dict[str, Any]) -> str:
        return "notes.txt\nsecrets.txt" if call["id"] == "call_B" else recorded_output(call)

    with proxy(upstream=upstream_url, trajectory=[path], require_restored=True) as url:
        root = url.removesuffix("/v1")
        c = client(f"{root}/s/rollout-3/v1")
        for _ in range(2):  # a retry is refused the same way: the verdict stays
            with pytest.raises(openai.PermissionDeniedError) as refused:
                run(c, changed)
            error = refused.value.body
            assert isinstance(error, dict) and error["code"] == "session_not_restored", error
            assert "--require-restored" in error["message"] and "step 2" in error["message"]
            assert error["replay"]["restore"] == "restart-only"
        status = httpx.get(f"{root}/replay/sessions/rollout-3").json()
    assert fake.requests == []  # the model was never spent
    assert status["phase"] != "live" and status["live_since"] is None
    assert status["forwarded"]["main"] == 0 and status["errors"] == 2
    assert status["restore"]["first_mismatch"]["turn"] == 2


def test_require_restored_hands_off_a_restored_session(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    fake.then(text("Live now."))
    path = write_trajectory(RECORDED, name="run")
    with proxy(upstream=upstream_url, trajectory=[path], require_restored=True) as url:
        message, headers = run(client(f"{url.removesuffix('/v1')}/s/r4/v1"), recorded_output)
    assert message["content"] == "Live now." and headers["x-replay-restore"] == "restored"


def side_call(c: openai.OpenAI, **headers: str) -> Any:
    """A title request, as harnesses make them: no tools, a prompt of its own."""
    return c.chat.completions.with_raw_response.create(
        model="gpt-side",
        messages=[{"role": "user", "content": "Title for: Create notes.txt"}],
        extra_headers=headers,
    )


def test_the_fence_refuses_side_and_subagent_calls_before_the_hand_off_only(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    fake.then(text("Live now."), text("A title"))
    path = write_trajectory(RECORDED, name="run")
    with proxy(upstream=upstream_url, trajectory=[path], fence=True) as url:
        root = url.removesuffix("/v1")
        c = client(f"{root}/s/fenced-1/v1")
        with pytest.raises(openai.PermissionDeniedError) as side:
            side_call(c)
        with pytest.raises(openai.PermissionDeniedError) as child:
            c.chat.completions.create(
                model="gpt-child",
                messages=start_messages(),
                tools=TOOLS,
                extra_headers={"x-claude-code-agent-id": "a1b2c3d4e5f6a7b8"},
            )
        assert fake.requests == []  # nothing of the session reached the model before its cut
        message, _ = run(c, recorded_output)  # the main lane replays, then hands off
        after = side_call(c)  # after the hand-off the session is live: side calls go upstream
        status = httpx.get(f"{root}/replay/sessions/fenced-1").json()
    for refused in (side.value.body, child.value.body):
        assert isinstance(refused, dict) and refused["code"] == "fenced_before_handoff"
    assert "the toolless call POST /v1/chat/completions (model 'gpt-side')" in side.value.message
    assert "subagent a1b2c3d4e5f6a7b8 of fenced-1" in child.value.message
    assert "the recordings hold no subagent request" in child.value.message
    assert message["content"] == "Live now."
    assert after.headers["x-replay-source"] == "upstream"
    assert [r.json["model"] for r in fake.requests] == ["gpt-test", "gpt-side"]
    assert status["errors"] == 2


def test_a_fenced_resume_of_a_recorded_run_answers_its_side_call_from_the_recording(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    """Record a run through the proxy (a side call, two tool turns, a final answer), then resume
    it fenced at turn 2 with no model before the cut: the side call is the recorded one."""
    fake, upstream_url = upstream
    fake.then(
        text("Notes run"),
        tool_call("bash", '{"command": "touch notes.txt"}', "call_A"),
        tool_call("bash", '{"command": "ls -la"}', "call_B"),
        text("Done: notes.txt exists."),
    )
    recordings = tmp_path / "rec"
    with proxy(upstream=upstream_url, record_dir=recordings) as url:
        c = client(f"{url.removesuffix('/v1')}/s/first/v1")
        assert side_call(c).parse().choices[0].message.content == "Notes run"
        run(c, recorded_output)
    [recording] = sorted(recordings.glob("*.jsonl"))
    live = FakeUpstream().then(text("Live after the cut."))
    with (
        running(live.app) as live_root,
        proxy(
            upstream=live_root + "/v1", trajectory=[recording], fence=True, replay_turns=2
        ) as url,
    ):
        root = url.removesuffix("/v1")
        c = client(f"{root}/s/second/v1", **{"x-replay-trajectory": recording.stem})
        title = side_call(c)
        message, headers = run(c, recorded_output)
        status = httpx.get(f"{root}/replay/sessions/second").json()
    assert title.headers["x-replay-source"] == "recorded"
    assert title.parse().choices[0].message.content == "Notes run"
    assert message["content"] == "Live after the cut." and headers["x-replay-restore"] == "restored"
    assert [r.json["model"] for r in live.requests] == ["gpt-test"]
    assert status["restore"]["verdict"] == "restored" and status["turns_served"] == 2


def test_without_the_fence_a_resumed_runs_recorded_side_call_is_still_the_recorded_one(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    """Resume mode: before the cut, a side call the session's recording holds is answered from
    it; one it does not hold goes upstream; after the cut every side call does."""
    fake, upstream_url = upstream
    fake.then(
        text("Notes run"),
        tool_call("bash", '{"command": "touch notes.txt"}', "call_A"),
        tool_call("bash", '{"command": "ls -la"}', "call_B"),
        text("Done: notes.txt exists."),
    )
    recordings = tmp_path / "rec"
    with proxy(upstream=upstream_url, record_dir=recordings) as url:
        c = client(f"{url.removesuffix('/v1')}/s/first/v1")
        side_call(c)
        run(c, recorded_output)
    [recording] = sorted(recordings.glob("*.jsonl"))
    live = FakeUpstream().then(text("Another title"), text("Live after the cut."), text("Late"))
    with (
        running(live.app) as live_root,
        proxy(upstream=live_root + "/v1", trajectory=[recording], replay_turns=2) as url,
    ):
        c = client(
            f"{url.removesuffix('/v1')}/s/second/v1", **{"x-replay-trajectory": recording.stem}
        )
        title = side_call(c)
        other = c.chat.completions.with_raw_response.create(
            model="gpt-side", messages=[{"role": "user", "content": "Summarise the session"}]
        )
        message, _ = run(c, recorded_output)
        late = side_call(c)
    assert title.headers["x-replay-source"] == "recorded"
    assert other.headers["x-replay-source"] == "upstream"
    assert message["content"] == "Live after the cut."
    assert late.headers["x-replay-source"] == "upstream"  # live now: the model answers
    assert [r.json["model"] for r in live.requests] == ["gpt-side", "gpt-test", "gpt-side"]
