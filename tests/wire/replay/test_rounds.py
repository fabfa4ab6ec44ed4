"""Sessions of several rounds and branches at turn K, over real sockets with the SDKs.

A session of several rounds is recorded through the proxy, then replayed strictly and in
resume mode, round by round; sessions branch from one trajectory at different K (header,
flag, admin API).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.agent import SYSTEM, TASK, agent_step, bash, client, follow, start_messages
from tests.helpers.servers import FakeUpstream, text, tool_call

FOLLOW_UPS = ["Now list the directory.", "Thanks, that is all."]


def converse(
    c: openai.OpenAI, prompts: list[str], *, stream: bool = False
) -> Iterator[tuple[dict[str, Any], dict[str, str]]]:
    """An agent loop that asks each follow-up after the answer, as a chat UI or a resumed CLI
    session does; yields each assistant message and its answer's headers."""
    messages = start_messages()
    for k, prompt in enumerate(prompts):
        if k:
            messages.append({"role": "user", "content": prompt})
        while True:
            message, headers = agent_step(c, messages, stream=stream)
            yield message, headers
            follow(messages, message)
            if not message["tool_calls"]:
                break


def answers(c: openai.OpenAI, prompts: list[str], stream: bool = False) -> list[Any]:
    return [
        (m["content"], [t["id"] for t in m["tool_calls"]])
        for m, _ in converse(c, prompts, stream=stream)
    ]


def status(url: str, session: str) -> dict[str, Any]:
    answer = httpx.get(url.removesuffix("/v1") + f"/replay/sessions/{session}")
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def script_conversation(fake: FakeUpstream) -> None:
    fake.then(
        tool_call("bash", '{"command": "touch notes.txt"}', "call_c1"),
        text("Created notes.txt."),
        tool_call("bash", '{"command": "ls"}', "call_c2"),
        text("It holds notes.txt."),
        text("Done."),
    )


EXPECTED = [
    (None, ["call_c1"]),
    ("Created notes.txt.", []),
    (None, ["call_c2"]),
    ("It holds notes.txt.", []),
    ("Done.", []),
]


@pytest.fixture
def recorded(proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path) -> Path:
    fake, upstream_url = upstream
    script_conversation(fake)
    with proxy(upstream=upstream_url, record_dir=tmp_path / "rec") as url:
        got = answers(client(url, **{"x-session-affinity": "ses_talk"}), [TASK, *FOLLOW_UPS])
    assert got == EXPECTED
    return tmp_path / "rec" / "ses_talk.jsonl"


@pytest.mark.parametrize("stream", [False, True])
def test_a_recorded_conversation_replays_strictly_across_its_rounds(
    stream: bool, recorded: Path, proxy: ProxyFactory
) -> None:
    with proxy(trajectory=[recorded], mode="strict") as url:
        c = client(url, **{"x-session-affinity": "ses_ci"})
        got = answers(c, [TASK, *FOLLOW_UPS], stream=stream)
        done = status(url, "ses_ci")
        # a step beyond the recording is refused as before
        with pytest.raises(openai.NotFoundError) as beyond:
            answers(c, [TASK, *FOLLOW_UPS, "And one more question."])
    assert got == EXPECTED
    assert done["turns_served"] == 5 and done["divergences"] == 0 and done["complete"]
    assert done["script"]["rounds"] == 3
    assert "asked for step 6 but" in beyond.value.message


def test_a_different_follow_up_is_a_divergence_in_strict_and_resume_mode(
    recorded: Path, proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    recording = len(fake.requests)  # what the recording run sent
    prompts = [TASK, "Now delete the directory.", FOLLOW_UPS[1]]
    with (
        proxy(trajectory=[recorded], mode="strict") as url,
        pytest.raises(openai.NotFoundError) as strict,
    ):
        answers(client(url, **{"x-session-affinity": "s1"}), prompts)
    with proxy(trajectory=[recorded], upstream=upstream_url) as url:
        with pytest.raises(openai.NotFoundError) as resume:
            answers(client(url, **{"x-session-affinity": "s2"}), prompts)
        diverged = status(url, "s2")
    for caught in (strict, resume):
        error = caught.value.body
        assert isinstance(error, dict) and error["code"] == "replay_diverged", error
        assert error["param"] == "messages[5].content"
        assert caught.value.response.headers["x-should-retry"] == "false"
    assert "the follow-up user message before scripted turn 3 is not the recorded one" in (
        resume.value.message
    )
    assert diverged["divergence"]["kind"] == "follow-up" and diverged["turns_served"] == 2
    assert len(fake.requests) == recording  # nothing went upstream

    # --on-divergence live: the session takes over from the model there
    fake.then(text("Deleted."))
    with proxy(trajectory=[recorded], upstream=upstream_url, on_divergence="live") as url:
        got = answers(client(url, **{"x-session-affinity": "s3"}), prompts[:2])
        live = status(url, "s3")
    assert got == [*EXPECTED[:2], ("Deleted.", [])]
    assert live["phase"] == "live" and live["live_after_turn"] == 2
    assert fake.posts()[-1].json["messages"][-1] == {"role": "user", "content": prompts[1]}


def test_resume_mode_serves_each_round_then_the_next_question_goes_live(
    recorded: Path, proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    recording = len(fake.requests)
    fake.then(text("Live answer."))
    with proxy(trajectory=[recorded], upstream=upstream_url) as url:
        c = client(url, **{"x-session-affinity": "s_resume"})
        steps = list(converse(c, [TASK, *FOLLOW_UPS, "What else is there?"]))
        done = status(url, "s_resume")
    sources = [h["x-replay-source"] for _, h in steps]
    assert sources == ["scripted"] * 5 + ["upstream"]
    assert [h["x-replay-turn"] for _, h in steps[:5]] == [f"{k}/5" for k in range(1, 6)]
    assert done["phase"] == "live" and done["live_after_turn"] == 5 and done["complete"]
    [live] = fake.requests[recording:]
    assert live.json["messages"][-1]["content"] == "What else is there?"
    assert sum(m["role"] == "assistant" for m in live.json["messages"]) == 5


# one trajectory, two rounds, five turns: c1, c2, answer | follow-up | c3, answer
BRANCHED = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": TASK},
    {"role": "assistant", "content": None, "tool_calls": [bash("call_b1", "touch notes.txt")]},
    {"role": "tool", "tool_call_id": "call_b1", "content": ""},
    {"role": "assistant", "content": None, "tool_calls": [bash("call_b2", "ls")]},
    {"role": "tool", "tool_call_id": "call_b2", "content": "notes.txt"},
    {"role": "assistant", "content": "Part one is done."},
    {"role": "user", "content": FOLLOW_UPS[0]},
    {"role": "assistant", "content": None, "tool_calls": [bash("call_b3", "ls -la")]},
    {"role": "tool", "tool_call_id": "call_b3", "content": "notes.txt"},
    {"role": "assistant", "content": "All done."},
]


def sources(steps: list[tuple[dict[str, Any], dict[str, str]]]) -> list[str]:
    return [h["x-replay-source"] for _, h in steps]


def test_sessions_branch_from_one_trajectory_at_different_turns(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    fake, upstream_url = upstream
    path = write_trajectory(BRANCHED, name="branched")
    ks = {"k0": "0", "k1": "1", "k3": "3", "k4": "4", "whole": None}
    with proxy(trajectory=[path], upstream=upstream_url) as url:
        loops = {
            sid: converse(
                client(url, **{"x-session-affinity": sid, "x-replay-trajectory": "branched"}
                       | ({"x-replay-turns": k} if k is not None else {})),
                [TASK, FOLLOW_UPS[0]],
            )
            for sid, k in ks.items()
        }  # fmt: skip
        steps: dict[str, list[Any]] = {sid: [] for sid in ks}
        while loops:  # one step of each session in turn: they run side by side
            for sid in list(loops):
                step = next(loops[sid], None)
                if step is None:
                    del loops[sid]
                else:
                    steps[sid].append(step)
        states = {sid: status(url, sid) for sid in ks}
    s, u = "scripted", "upstream"
    # a live answer is text ("live answer"): it ends the round, then the follow-up is sent
    assert sources(steps["k0"]) == [u, u]
    assert sources(steps["k1"]) == [s, u, u]
    assert sources(steps["k3"]) == [s, s, s, u]
    assert sources(steps["k4"]) == [s, s, s, s, u]
    assert sources(steps["whole"]) == [s] * 5
    assert [h["x-replay-turn"] for _, h in steps["k3"][:3]] == ["1/3", "2/3", "3/3"]
    for sid, k in ks.items():
        state = states[sid]
        planned = 5 if k is None else int(k)
        assert state["replay_turns"] == (None if k is None else planned)
        assert state["turns_served"] == state["turns_planned"] == planned
        if k is not None:
            assert state["phase"] == "live" and state["live_reason"] == "branch point reached"
            assert state["live_after_turn"] == int(k)
    # k4's first live request holds the four replayed turns and the follow-up, nothing spliced
    k4 = [r.json for r in fake.posts() if r.headers.get("x-session-affinity") == "k4"]
    ids = [m["tool_calls"][0]["id"] for m in k4[0]["messages"] if m.get("tool_calls")]
    assert ids == ["call_b1", "call_b2", "call_b3"]
    assert sum(m.get("content") == FOLLOW_UPS[0] for m in k4[0]["messages"]) == 1


def test_the_branch_point_from_the_flag_and_the_admin_api(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    path = write_trajectory(BRANCHED, name="branched")
    with proxy(trajectory=[path], upstream=upstream_url, replay_turns=2) as url:
        root = url.removesuffix("/v1")
        flag = list(converse(client(url, **{"x-session-affinity": "by_flag"}), [TASK]))
        header = client(url, **{"x-session-affinity": "by_header", "x-replay-turns": "1"})
        by_header = list(converse(header, [TASK]))
        # the admin API: the trajectory as the body, K as ?turns=K
        put = httpx.put(f"{root}/replay/sessions/by_admin?turns=4", content=json.dumps(BRANCHED))
        assert put.status_code == 200 and put.json()["replay_turns"] == 4, put.text
        admin = list(
            converse(client(url, **{"x-session-affinity": "by_admin"}), [TASK, FOLLOW_UPS[0]])
        )
        bad = httpx.put(f"{root}/replay/sessions/by_admin?turns=two", content=json.dumps(BRANCHED))
        # a session's K is fixed when it binds: asking for another is refused, the state stays
        other = client(url, **{"x-session-affinity": "by_admin", "x-replay-turns": "3"})
        with pytest.raises(openai.BadRequestError) as conflict:
            agent_step(other, start_messages(), stream=False)
        kept = status(url, "by_admin")
        page = httpx.get(f"{root}/replay/ui").text
        with pytest.raises(openai.BadRequestError) as nonsense:
            agent_step(client(url, **{"x-replay-turns": "-1"}), start_messages(), stream=False)
    assert sources(flag) == ["scripted", "scripted", "upstream"]
    assert sources(by_header) == ["scripted", "upstream"]
    assert sources(admin) == ["scripted"] * 4 + ["upstream"]
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "turns"
    assert conflict.value.body["param"] == "x-replay-turns"  # type: ignore[index]
    assert "session by_admin branches at turn 4" in conflict.value.message
    assert kept["replay_turns"] == 4 and kept["turns_served"] == 4 and kept["errors"] == 0
    assert "4/4 turns · 4 scripted answers · branch at turn 4 of 5 · live after turn 4" in page
    assert "2/2 turns · 2 scripted answers · branch at turn 2 of 5 · live after turn 2" in page
    assert "must be a whole number of turns" in nonsense.value.message


def test_strict_mode_refuses_a_branch(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    path = write_trajectory(BRANCHED, name="branched")
    with proxy(trajectory=[path], mode="strict") as url:
        c = client(url, **{"x-session-affinity": "s", "x-replay-turns": "2"})
        with pytest.raises(openai.BadRequestError) as caught:
            agent_step(c, start_messages(), stream=False)
        put = httpx.put(
            url.removesuffix("/v1") + "/replay/sessions/s?turns=2", content=json.dumps(BRANCHED)
        )
    assert "--mode strict replays a recording and never goes live" in caught.value.message
    assert put.status_code == 400


def test_follow_ups_through_the_anthropic_sdk(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    path = write_trajectory(BRANCHED, name="branched")
    tools: Any = [{"name": "bash", "input_schema": {"type": "object"}}]
    with proxy(trajectory=[path], upstream=upstream_url) as url:
        c = anthropic.Anthropic(
            base_url=url.removesuffix("/v1"), api_key="sk-ant", max_retries=0,
            default_headers={"x-session-affinity": "claude"},
        )  # fmt: skip
        messages: list[Any] = [{"role": "user", "content": TASK}]
        served = []
        for prompt in [FOLLOW_UPS[0], None]:
            while True:
                answer = c.messages.create(
                    model="m", max_tokens=99, system=SYSTEM, messages=messages, tools=tools
                )
                served.append([b.type for b in answer.content])
                messages.append(
                    {"role": "assistant", "content": [b.model_dump() for b in answer.content]}
                )
                uses = [b for b in answer.content if b.type == "tool_use"]
                if not uses:
                    break
                messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": b.id, "content": "ok"} for b in uses
                ]})  # fmt: skip
            if prompt is not None:
                messages.append({"role": "user", "content": [{"type": "text", "text": prompt}]})
        done = status(url, "claude")
    assert served == [["tool_use"], ["tool_use"], ["text"], ["tool_use"], ["text"]]
    assert done["turns_served"] == 5 and done["divergences"] == 0
