"""Verdicts over real sockets: a strict replay run later and elsewhere (volatile) against a run
that changed, in the error, the status, the metrics, and with --fail-on changed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.agent import TASK, agent_step, client, follow
from tests.helpers.servers import FakeUpstream, text, tool_call

DATE_PATTERN = r"\b\d{4}-\d\d-\d\d\b"


def system(date: str, folder: str) -> dict[str, Any]:
    return {"role": "system", "content": f"You are an agent. Today is {date}. Work in {folder}."}


def run(url: str, session: str, date: str, folder: str, task: str = TASK) -> list[Any]:
    c = client(url, **{"x-session-affinity": session})
    messages = [system(date, folder), {"role": "user", "content": task}]
    got = []
    while True:
        message, _ = agent_step(c, messages, stream=False)
        got.append(message["tool_calls"] or message["content"])
        if not message["tool_calls"]:
            return got
        follow(messages, message)


@pytest.fixture
def recorded(proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path) -> Path:
    fake, upstream_url = upstream
    fake.then(tool_call("bash", '{"command": "touch notes.txt"}', "call_rec_1"), text("Done."))
    with proxy(upstream=upstream_url, record_dir=tmp_path / "rec") as url:
        run(url, "ses_rec", "2026-12-05", "/home/ana/proj")
    return tmp_path / "rec" / "ses_rec.jsonl"


def status(url: str, session: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{url.removesuffix('/v1')}/replay/sessions/{session}").json()
    return data


def metrics(url: str) -> str:
    return httpx.get(url.removesuffix("/v1") + "/metrics").text


def test_a_later_run_diverges_as_volatile_and_says_which_mask_covers_it(
    recorded: Path, proxy: ProxyFactory
) -> None:
    with proxy(trajectory=[recorded], mode="strict") as url:
        with pytest.raises(openai.NotFoundError) as caught:
            run(url, "ses_later", "2027-01-14", "/home/ana/proj")
        later = status(url, "ses_later")
        counted = metrics(url)
    error = caught.value.body
    assert isinstance(error, dict)
    assert (
        f"verdict:  volatile: only values that change between runs differ; --mask '{DATE_PATTERN}'"
        in error["message"]
    )
    replay = error["replay"]
    assert replay["verdict"] == "volatile" and replay["path"] == "messages[0].content"
    assert replay["masks"] == [{"what": "a date", "mask": DATE_PATTERN}]
    expected, actual = replay["excerpts"]["expected"], replay["excerpts"]["actual"]
    assert expected["text"][expected["start"] : expected["end"]] == "2026-12-05"
    assert actual["text"][actual["start"] : actual["end"]] == "2027-01-14"
    assert later["divergence"]["verdict"] == "volatile" and later["phase"] == "diverged"
    assert 'replay_proxy_divergences_total{kind="request",verdict="volatile"} 1.0' in counted


def test_fail_on_changed_serves_a_volatile_divergence_and_still_fails_a_changed_one(
    recorded: Path, proxy: ProxyFactory, tmp_path: Path
) -> None:
    with proxy(trajectory=[recorded], mode="strict", fail_on="changed") as url:
        got = run(url, "ses_later", "2027-01-14", "/home/ana/proj")
        later = status(url, "ses_later")
        volatile = metrics(url)
    with proxy(trajectory=[recorded], mode="strict", fail_on="changed") as url:
        with pytest.raises(openai.NotFoundError) as caught:
            run(url, "ses_other", "2026-12-05", "/home/ana/proj", task="Delete every file.")
        other = status(url, "ses_other")
        changed = metrics(url)
    assert got[-1] == "Done." and later["phase"] == "served" and later["divergences"] == 0
    assert later["volatile"]["served"] == 2 and later["volatile"]["first"]["verdict"] == "volatile"
    error = caught.value.body
    assert isinstance(error, dict) and error["replay"]["verdict"] == "changed"
    assert "Delete every file." in error["replay"]["actual"]
    assert other["divergence"]["verdict"] == "changed"
    assert 'kind="request",verdict="volatile"} 2.0' in volatile
    assert 'kind="request",verdict="changed"} 1.0' in changed


def test_a_mask_file_makes_the_later_run_pass(
    recorded: Path, proxy: ProxyFactory, tmp_path: Path
) -> None:
    masks = tmp_path / "masks.txt"
    masks.write_text(f"# dates change between runs\n{DATE_PATTERN}\n\n(?<=Work in )\\S+(?=\\.)\n")
    with proxy(trajectory=[recorded], mode="strict", mask_file=[masks]) as url:
        got = run(url, "ses_later", "2027-01-14", "/srv/ci/build-9")
        later = status(url, "ses_later")
    assert got[-1] == "Done." and later["divergences"] == 0 and later["complete"]


def test_a_bad_mask_file_stops_start_up_saying_which(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from proxy.config import Settings

    masks = tmp_path / "masks.txt"
    masks.write_text("(unclosed\n")
    with pytest.raises(ValidationError, match=re.escape(f"{masks}: '(unclosed' is not a valid")):
        Settings(mask_file=(masks,))
    with pytest.raises(ValidationError, match="cannot read the mask file"):
        Settings(mask_file=(tmp_path / "missing.txt",))


def test_the_recording_keeps_the_clients_request_and_the_spliced_one_apart(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path, write_trajectory: Any
) -> None:
    import json

    fake, upstream_url = upstream
    fake.then(text("Done."))
    later = "Also list the files."
    script = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": TASK},
        {"role": "assistant", "content": None, "tool_calls": [_bash("call_A")]},
        {"role": "tool", "tool_call_id": "call_A", "content": "ok"},
        {"role": "user", "content": later},
    ]
    with proxy(
        upstream=upstream_url, trajectory=[write_trajectory(script)], record_dir=tmp_path / "rec"
    ) as url:
        c = client(url, **{"x-session-affinity": "s1"})
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": TASK}]
        first, _ = agent_step(c, messages, stream=False)
        follow(messages, first)
        agent_step(c, messages, stream=False)  # live, with the later user message spliced in
    [_, live] = [
        json.loads(line) for line in (tmp_path / "rec" / "s1.jsonl").read_text().splitlines()
    ]
    assert later not in json.dumps(live["request"])
    assert later in json.dumps(live["forwarded"])


def _bash(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}


@pytest.mark.parametrize("stream", [False, True])
def test_a_recorded_runs_usage_is_what_its_replay_reports(
    stream: bool, proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    """The fake model says 11 input and 7 output tokens for each answer: a recording keeps that
    with its turns, and a replay of it through the Anthropic API reports it there."""
    from proxy.formats import load_file
    from proxy.replay.trajectory import Usage

    fake, upstream_url = upstream
    fake.then(tool_call("bash", '{"command": "touch notes.txt"}', "call_rec_1"), text("Done."))
    with proxy(upstream=upstream_url, record_dir=tmp_path / "rec") as url:
        c = client(url, **{"x-session-affinity": "ses_u"})
        messages = [system("2026-12-05", "/w"), {"role": "user", "content": TASK}]
        for _ in range(2):
            message, _ = agent_step(c, messages, stream=stream)
            if message["tool_calls"]:
                follow(messages, message)
    recording = tmp_path / "rec" / "ses_u.jsonl"
    assert [turn.usage for turn in load_file(recording).turns] == [Usage(11, 7), Usage(11, 7)]
    with proxy(trajectory=[recording]) as url:
        answer = httpx.post(
            url.removesuffix("/v1") + "/v1/messages",
            headers={"x-session-affinity": "ses_again"},
            json={
                "model": "m",
                "max_tokens": 100,
                "system": messages[0]["content"],
                "messages": [{"role": "user", "content": TASK}],
                "tools": [{"name": "bash", "input_schema": {"type": "object"}}],
            },
        )
    usage = answer.json()["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (11, 7), answer.text


CLEAN = '{"command": "rm -rf /tmp/run-a/build"}'


def cleaning(url: str, session: str, folder: str, command: str | None = None) -> list[Any]:
    """The agent works in `folder` (its system prompt says so) and runs what it is given, or
    `command` instead; the tool result names the folder."""
    c = client(url, **{"x-session-affinity": session})
    messages = [system("2026-12-05", folder), {"role": "user", "content": TASK}]
    got = []
    while True:
        message, _ = agent_step(c, messages, stream=False)
        got.append(message["tool_calls"] or message["content"])
        if not message["tool_calls"]:
            return got
        for call in message["tool_calls"]:
            call["function"]["arguments"] = command or call["function"]["arguments"]
        follow(messages, message, output=lambda _: f"removed {folder}")


def test_fail_on_changed_serves_another_temporary_folder_but_not_another_command(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    """A temporary folder is a value that changes between runs; `/tmp/../../home/user` is a
    way out of it, and a command the harness ran is the run itself, whatever it differs in."""
    fake, upstream_url = upstream
    fake.then(tool_call("bash", CLEAN, "call_rec_1"), text("Done."))
    with proxy(upstream=upstream_url, record_dir=tmp_path / "rec") as url:
        cleaning(url, "ses_rec", "/tmp/run-a/build")
    recording = tmp_path / "rec" / "ses_rec.jsonl"

    def replayed(session: str, folder: str, command: str | None = None) -> dict[str, Any]:
        with proxy(trajectory=[recording], mode="strict", fail_on="changed") as url:
            try:
                cleaning(url, session, folder, command)
                error = None
            except openai.NotFoundError as exc:
                error = exc.body
            return {"error": error, "status": status(url, session)}

    elsewhere = replayed("ses_elsewhere", "/tmp/run-b/build")
    assert elsewhere["error"] is None and elsewhere["status"]["volatile"]["served"] == 2
    assert elsewhere["status"]["complete"], elsewhere

    way_out = replayed("ses_way_out", "/tmp/../../home/user")
    assert way_out["error"] is not None and way_out["error"]["replay"]["verdict"] == "changed"
    assert way_out["status"]["turns_served"] == 0

    # the same folder, but the harness ran another command than the recorded one
    other = replayed("ses_other", "/tmp/run-a/build", '{"command": "rm -rf /tmp/run-b/build"}')
    assert other["error"] is not None and other["error"]["replay"]["verdict"] == "changed"
    assert "tool_calls" in other["error"]["replay"]["path"], other["error"]["replay"]
    assert other["status"]["turns_served"] == 1
