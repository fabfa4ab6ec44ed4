"""Harnesses that call their tools through text, over real sockets with the official SDKs.

The harness is tests/helpers/text_agent.py: XML actions (`<function=execute_bash>...`), run for
real in a workspace, each output sent back as a user message; no request carries tools, and a
title call goes first. Its recorded run is a text-based script: each request whose conversation
is the script's takes its turn, side calls go upstream and bind nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from proxy.formats import load_all
from tests.conftest import ProxyFactory
from tests.helpers.agent import client
from tests.helpers.servers import FakeUpstream, Seen, running, session_status, text
from tests.helpers.text_agent import (
    FINISH,
    SYSTEM,
    TASK,
    TITLE_SYSTEM,
    action,
    observation,
    run_agent,
    title,
)

COMMANDS = ["echo hello > hello.txt", "ls", "cat hello.txt"]
OUTPUTS = ["", "hello.txt\n", "hello\n"]
ANSWERS = [*(action(c, f"Step {k + 1}.") for k, c in enumerate(COMMANDS)), FINISH]
RECORDED: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": TASK},
]
for answer, output in zip(ANSWERS, [*OUTPUTS, None], strict=True):
    RECORDED.append({"role": "assistant", "content": answer})
    if output is not None:
        RECORDED.append({"role": "user", "content": observation(output)})


def model(seen: Seen) -> Any:
    """The live model, from the conversation: a title, or the next action."""
    messages = seen.json["messages"]
    if messages[0]["content"] == TITLE_SYSTEM:
        return text("Hello file")(seen)
    done = sum(1 for m in messages if m["role"] == "assistant")
    return text(ANSWERS[min(done, len(ANSWERS) - 1)])(seen)


def workspace(tmp_path: Path, name: str = "ws") -> Path:
    """The harness's working folder (tmp_path holds the trajectory: `ls` would show it)."""
    folder = tmp_path / name
    folder.mkdir()
    return folder


def rebuilt(workspace: Path) -> None:
    assert (workspace / "hello.txt").read_text() == "hello\n"


@pytest.fixture
def script(write_trajectory: Any) -> Path:
    path: Path = write_trajectory(RECORDED, name="xml-run")
    return path


@pytest.mark.parametrize("stream", [False, True])
def test_the_run_replays_for_real_and_the_title_call_goes_upstream(
    proxy: ProxyFactory, script: Path, tmp_path: Path, stream: bool
) -> None:
    fake = FakeUpstream(fallback=model)
    with (
        running(fake.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[script]) as url,
    ):
        c = client(url, **{"x-session-affinity": "xml-1"})
        named, headers = title(c)  # first, as harnesses send it: it must not take turn 1
        assert named == "Hello file" and headers["x-replay-source"] == "upstream"
        assert session_status(url, "xml-1")["script"] is None  # nothing bound by a side call
        ws = workspace(tmp_path)
        steps = run_agent(c, ws, stream=stream)
        session = session_status(url, "xml-1")
    assert [s.content for s in steps] == ANSWERS
    assert [s.headers["x-replay-turn"] for s in steps] == ["1/4", "2/4", "3/4", "4/4"]
    assert {s.headers["x-replay-source"] for s in steps} == {"scripted"}
    rebuilt(ws)
    [asked] = fake.posts()  # the title call only
    assert asked.json["messages"][0]["content"] == TITLE_SYSTEM
    assert session["script"]["text_based"] and session["turns_served"] == 4, session
    assert session["complete"] and session["forwarded"]["toolless"] == 1, session
    assert session["observations"]["differing"] == 0 and session["divergences"] == 0, session


def test_after_the_branch_point_the_model_continues_with_the_replayed_history(
    proxy: ProxyFactory, script: Path, tmp_path: Path
) -> None:
    fake = FakeUpstream(fallback=model)
    with (
        running(fake.app) as upstream,
        proxy(upstream=upstream + "/v1", trajectory=[script]) as url,
    ):
        c = client(url, **{"x-session-affinity": "xml-2", "x-replay-turns": "2"})
        ws = workspace(tmp_path)
        steps = run_agent(c, ws)
        session = session_status(url, "xml-2")
    assert [s.headers["x-replay-source"] for s in steps] == ["scripted"] * 2 + ["upstream"] * 2
    assert [s.content for s in steps] == ANSWERS  # the model went on from the replayed history
    first_live = fake.posts()[0].json["messages"]
    assert [m["content"] for m in first_live if m["role"] == "assistant"] == ANSWERS[:2]
    assert first_live[-1] == {"role": "user", "content": observation("hello.txt\n")}
    rebuilt(ws)
    assert session["live_reason"] == "branch point reached" and session["live_after_turn"] == 2


def test_a_different_observation_is_reported_or_refused(
    proxy: ProxyFactory, script: Path, tmp_path: Path
) -> None:
    ws = workspace(tmp_path)
    (ws / "extra.txt").write_text("not in the recording\n")  # `ls` now says more
    with proxy(upstream="http://127.0.0.1:9/v1", trajectory=[script]) as url:
        steps = run_agent(client(url, **{"x-session-affinity": "warned"}), ws)
        warned = session_status(url, "warned")
    assert len(steps) == 4 and {s.headers["x-replay-source"] for s in steps} == {"scripted"}
    first = warned["observations"]["first"]
    assert warned["observations"]["differing"] == 1 and first["kind"] == "observation", warned
    assert first["turn"] == 2 and first["path"] == "messages[5].content", first

    other = workspace(tmp_path, "refused")
    (other / "extra.txt").write_text("not in the recording\n")
    settings = {"on_observation_divergence": "error"}
    with proxy(upstream="http://127.0.0.1:9/v1", trajectory=[script], **settings) as url:
        c = client(url, **{"x-session-affinity": "refused"})
        with pytest.raises(openai.NotFoundError) as refused:
            run_agent(c, other)
        state = session_status(url, "refused")
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "replay_diverged", error
    assert "observation after scripted turn 2" in error["message"], error
    assert error["param"] == "messages[5].content"
    assert state["turns_served"] == 2 and state["phase"] != "live", state


def test_a_different_answer_in_the_history_is_a_divergence(
    proxy: ProxyFactory, script: Path
) -> None:
    with proxy(upstream="http://127.0.0.1:9/v1", trajectory=[script]) as url:
        c = client(url, **{"x-session-affinity": "edited"})
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": TASK},
            {"role": "assistant", "content": action("rm -rf build")},
            {"role": "user", "content": observation("")},
        ]
        with pytest.raises(openai.NotFoundError) as diverged:
            c.chat.completions.create(model="gpt-test", messages=messages)  # type: ignore[arg-type]
        session = session_status(url, "edited")
    error = diverged.value.body
    assert isinstance(error, dict) and error["param"] == "messages[2].content", error
    assert "is not scripted turn 1" in error["message"]
    assert session["divergence"]["kind"] == "history" and session["turns_served"] == 0


def test_after_script_stop_ends_the_run_without_a_model(
    proxy: ProxyFactory, write_trajectory: Any, tmp_path: Path
) -> None:
    three = write_trajectory(RECORDED[:-1], name="no-finish")  # the run without its finish
    ws = workspace(tmp_path)
    with proxy(upstream="http://127.0.0.1:9/v1", trajectory=[three], after_script="stop") as url:
        steps = run_agent(client(url, **{"x-session-affinity": "stopped"}), ws)
    assert [s.headers["x-replay-source"] for s in steps] == ["scripted"] * 3 + ["stop"]
    assert "--after-script stop" in steps[-1].content  # no action in it: the harness ends
    rebuilt(ws)


@pytest.mark.parametrize("bind_on_task", [False, True])
def test_side_calls_and_other_tasks_bind_nothing(
    proxy: ProxyFactory, script: Path, tmp_path: Path, bind_on_task: bool
) -> None:
    fake = FakeUpstream(fallback=model)
    settings = {"trajectory": [script], "bind_on_task": bind_on_task}
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", **settings) as url:
        # no session header: each conversation is its own session (a fingerprint)
        c = client(url)
        assert title(c)[1]["x-replay-source"] == "upstream"
        other = run_agent(
            c, workspace(tmp_path, "other-task"), task="Something else entirely.", steps=1
        )
        assert other[0].headers["x-replay-source"] == "upstream"
        steps = run_agent(c, workspace(tmp_path))  # the script is still free for its own task
        sessions = httpx.get(url.removesuffix("/v1") + "/replay/sessions").json()["data"]
    assert {s.headers["x-replay-source"] for s in steps} == {"scripted"}
    bound = [s for s in sessions if s["script"] is not None]
    assert len(sessions) == 3 and len(bound) == 1 and bound[0]["turns_served"] == 4, sessions


def test_a_text_mode_run_recorded_live_replays_strictly(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    fake = FakeUpstream(fallback=model)
    records = tmp_path / "records"
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", record_dir=records) as url:
        c = client(url, **{"x-session-affinity": "rec"})
        title(c)
        first = workspace(tmp_path, "first")
        run_agent(c, first)
    rebuilt(first)
    [recording] = sorted(records.iterdir())
    [loaded] = load_all(recording)
    assert loaded.text_based and [t.text for t in loaded.turns] == ANSWERS
    assert [s.lane for s in loaded.side] == ["toolless"]  # the title call stays a side exchange

    with proxy(trajectory=[recording], mode="strict") as url:
        c = client(url, **{"x-session-affinity": "rec"})
        # answered from the recording's side exchange; a branch header is no question for it
        named, headers = title(client(url, **{"x-session-affinity": "rec", "x-replay-turns": "1"}))
        assert named == "Hello file" and headers["x-replay-source"] == "recorded"
        again = workspace(tmp_path, "again")
        steps = run_agent(c, again)
        rebuilt(again)
        session = session_status(url, "rec")
        changed = workspace(tmp_path, "changed")
        (changed / "extra.txt").write_text("new\n")
        c2 = client(url, **{"x-session-affinity": "rec-2"})
        with pytest.raises(openai.NotFoundError) as refused:
            run_agent(c2, changed)
    assert [s.headers["x-replay-turn"] for s in steps] == ["1/4", "2/4", "3/4", "4/4"]
    assert session["turns_served"] == 4 and session["errors"] == 0, session
    error = refused.value.body
    assert (
        isinstance(error, dict)
        and "differs from the recorded request of step 3" in error["message"]
    )


def test_the_anthropic_sdk_gets_the_scripted_text_streamed(
    proxy: ProxyFactory, script: Path
) -> None:
    with proxy(upstream="http://127.0.0.1:9/v1", trajectory=[script]) as url:
        c = anthropic.Anthropic(
            base_url=url.removesuffix("/v1"),
            api_key="sk-ant-client",
            max_retries=0,
            default_headers={"x-session-affinity": "claude-text"},
        )
        messages: list[Any] = [{"role": "user", "content": TASK}]
        with c.messages.stream(
            model="claude-test", max_tokens=100, system=SYSTEM, messages=messages
        ) as stream:
            first = stream.get_final_message()
        messages += [
            {"role": "assistant", "content": first.content[0].text},  # type: ignore[union-attr]
            {"role": "user", "content": observation("")},
        ]
        second = c.messages.create(
            model="claude-test", max_tokens=100, system=SYSTEM, messages=messages
        )
    assert first.content[0].text == ANSWERS[0] and first.stop_reason == "end_turn"  # type: ignore[union-attr]
    assert second.content[0].text == ANSWERS[1]  # type: ignore[union-attr]
