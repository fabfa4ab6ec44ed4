"""One recording per run, as a cassette holds one: a session recorded again (through the same
proxy after the agent started over, or through another proxy on the same folder) goes on in
<session>.2.jsonl, said in the log, and each file loads as the run it holds. A retry or a follow-up
is no new run. A file that holds two runs (put together by hand, or written before this) fails to
load, naming the line where the second begins, instead of replaying the last one silently. Real
sockets, the openai SDK as the client; the workers of one `serve` write one run to one file."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proxy.errors import LoadError
from proxy.formats import load_file
from tests.conftest import ROOT, ProxyFactory
from tests.helpers.agent import agent_step, client, follow, start_messages
from tests.helpers.servers import FakeUpstream, running, status, text, tool_call

GUARD = 120.0  # seconds: only a failure guard, never a pace the test relies on


def answers(run: str) -> list[Any]:
    """The model's answers for one run: two tool calls, then its final text."""
    return [
        tool_call("bash", '{"command": "touch notes.txt"}', f"call_{run}_1"),
        tool_call("bash", '{"command": "ls"}', f"call_{run}_2"),
        text(f"Done ({run})."),
    ]


def agent_run(url: str, **headers: str) -> list[str]:
    """One agent loop to its final answer; the tool call ids it was given, and that answer."""
    c = client(url, **headers)
    messages = start_messages()
    got = []
    while True:
        message, _ = agent_step(c, messages, stream=False)
        got += [call["id"] for call in message["tool_calls"]] or [message["content"]]
        if not message["tool_calls"]:
            return got
        follow(messages, message)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def calls_of(path: Path) -> list[str]:
    return [c.id for turn in load_file(path).turns for c in turn.tool_calls]


def test_the_same_session_run_twice_through_one_proxy_is_two_recordings(
    proxy: ProxyFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.recording")
    fake = FakeUpstream().then(*answers("a"), *answers("b"))
    folder = tmp_path / "rec"
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", record_dir=folder) as url:
        first = agent_run(url, **{"x-session-affinity": "ses_twice"})
        second = agent_run(url, **{"x-session-affinity": "ses_twice"})
    assert first == ["call_a_1", "call_a_2", "Done (a)."]
    assert second == ["call_b_1", "call_b_2", "Done (b)."]
    assert sorted(p.name for p in folder.iterdir()) == ["ses_twice.2.jsonl", "ses_twice.jsonl"]
    one, two = folder / "ses_twice.jsonl", folder / "ses_twice.2.jsonl"
    assert calls_of(one) == ["call_a_1", "call_a_2"] and calls_of(two) == ["call_b_1", "call_b_2"]
    assert load_file(one).turns[-1].text == "Done (a)."
    # each line names its run, one per file
    assert len({x["run"] for x in lines(one)}) == 1 and len({x["run"] for x in lines(two)}) == 1
    assert lines(one)[0]["run"] != lines(two)[0]["run"]
    said = [r.getMessage() for r in caplog.records if r.name == "proxy.recording"]
    assert said == [
        "session ses_twice begins another run: its conversation starts over (a request with no "
        f"answer of the model in it, after the run's steps); it is recorded to {two} ({one} "
        "keeps the one before)"
    ]


def test_a_session_with_no_header_run_twice_on_one_task_is_two_recordings(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    """Keyed by its system prompt and task, as mini-swe-agent's sessions are: one session id."""
    fake = FakeUpstream().then(*answers("a"), *answers("b"))
    folder = tmp_path / "rec"
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", record_dir=folder) as url:
        agent_run(url)
        agent_run(url)
    [first, second] = sorted(folder.iterdir(), key=lambda p: len(p.name))
    assert first.name.startswith("fp-") and second.name == first.name.replace(".jsonl", ".2.jsonl")
    assert calls_of(first) == ["call_a_1", "call_a_2"]
    assert calls_of(second) == ["call_b_1", "call_b_2"]


def test_a_proxy_started_again_on_the_folder_records_the_session_beside_the_earlier_run(
    proxy: ProxyFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.recording")
    fake = FakeUpstream().then(*answers("a"), *answers("b"))
    folder = tmp_path / "rec"
    with running(fake.app) as upstream:
        with proxy(upstream=upstream + "/v1", record_dir=folder) as url:
            agent_run(url, **{"x-session-affinity": "ses_again"})
        earlier = (folder / "ses_again.jsonl").read_bytes()
        with proxy(upstream=upstream + "/v1", record_dir=folder) as url:
            agent_run(url, **{"x-session-affinity": "ses_again"})
    assert (folder / "ses_again.jsonl").read_bytes() == earlier  # untouched
    assert calls_of(folder / "ses_again.2.jsonl") == ["call_b_1", "call_b_2"]
    said = [r.getMessage() for r in caplog.records if r.name == "proxy.recording"]
    assert said == [
        f"session ses_again is recorded to {folder / 'ses_again.2.jsonl'}: "
        f"{folder / 'ses_again.jsonl'} holds an earlier run of it"
    ]


def test_a_retried_first_request_and_a_follow_up_stay_in_the_run(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    fake = FakeUpstream().then(
        status(500, {"error": {"message": "overloaded", "type": "server_error"}}),
        *answers("a"),
        text("And the follow-up's answer."),
    )
    folder = tmp_path / "rec"
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", record_dir=folder) as url:
        c = client(url, **{"x-session-affinity": "ses_one"})
        messages = start_messages()
        with pytest.raises(Exception, match="overloaded"):
            agent_step(c, messages, stream=False)
        while True:  # the same first request again: a retry
            message, _ = agent_step(c, messages, stream=False)
            if not message["tool_calls"]:
                break
            follow(messages, message)
        messages += [
            {"role": "assistant", "content": message["content"]},
            {"role": "user", "content": "Now say what you did."},
        ]
        follow_up, _ = agent_step(c, messages, stream=False)
    assert follow_up["content"] == "And the follow-up's answer."
    assert [p.name for p in folder.iterdir()] == ["ses_one.jsonl"]
    recorded = lines(folder / "ses_one.jsonl")
    assert [x["status"] for x in recorded] == [500, 200, 200, 200, 200]
    t = load_file(folder / "ses_one.jsonl")
    assert [c.id for turn in t.turns for c in turn.tool_calls] == ["call_a_1", "call_a_2"]
    assert t.turns[-1].text == "And the follow-up's answer." and t.rounds == 2


def test_a_text_based_run_twice_is_two_recordings(proxy: ProxyFactory, tmp_path: Path) -> None:
    """A harness that calls its tools through text sends no tools: only tool-less requests."""
    fake = FakeUpstream().then(
        text("run: ls"), text("Done (a)."), text("run: ls"), text("Done (b).")
    )
    folder = tmp_path / "rec"
    task: list[Any] = [
        {"role": "system", "content": "Answer with a command."},
        {"role": "user", "content": "Go"},
    ]
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", record_dir=folder) as url:
        c = client(url, **{"x-session-affinity": "ses_text"})
        for _ in range(2):
            first = c.chat.completions.create(model="m", messages=task).choices[0].message
            later: list[Any] = [*task, {"role": "assistant", "content": first.content}]
            later.append({"role": "user", "content": "notes.txt"})
            c.chat.completions.create(model="m", messages=later)
    assert sorted(p.name for p in folder.iterdir()) == ["ses_text.2.jsonl", "ses_text.jsonl"]
    assert load_file(folder / "ses_text.jsonl").turns[-1].text == "Done (a)."
    assert load_file(folder / "ses_text.2.jsonl").turns[-1].text == "Done (b)."


def _run_twice_in_one_file(proxy: ProxyFactory, folder: Path) -> tuple[Path, int]:
    fake = FakeUpstream().then(*answers("a"), *answers("b"))
    with running(fake.app) as upstream, proxy(upstream=upstream + "/v1", record_dir=folder) as url:
        agent_run(url, **{"x-session-affinity": "ses_two"})
        agent_run(url, **{"x-session-affinity": "ses_two"})
    first, second = folder / "ses_two.jsonl", folder / "ses_two.2.jsonl"
    joined = folder.parent / "joined.jsonl"
    joined.write_bytes(first.read_bytes() + second.read_bytes())
    return joined, len(first.read_bytes().splitlines())


def test_a_file_that_holds_two_runs_fails_to_load_naming_where_the_second_begins(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    joined, before = _run_twice_in_one_file(proxy, tmp_path / "rec")
    with pytest.raises(LoadError, match=rf"line {before + 1} begins another run") as caught:
        load_file(joined)
    assert "session 'ses_two'" in str(caught.value) and "its run id is another" in str(caught.value)
    # a file written before runs were named: told apart by what the second run sends
    unnamed = tmp_path / "unnamed.jsonl"
    unnamed.write_bytes(
        b"".join(
            json.dumps({k: v for k, v in x.items() if k != "run"}).encode() + b"\n"
            for x in lines(joined)
        )
    )
    with pytest.raises(LoadError, match=rf"line {before + 1} begins another run") as caught:
        load_file(unnamed)
    assert "its conversation starts over" in str(caught.value)
    check = subprocess.run(
        [sys.executable, "-m", "proxy", "check", str(unnamed)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=GUARD,
        check=False,
    )
    assert check.returncode == 1 and f"line {before + 1} begins another run" in check.stderr


def test_the_workers_of_one_serve_record_one_run_to_one_file(tmp_path: Path) -> None:
    """Two worker processes share the port: each run's exchanges land in whichever accepts."""
    fake = FakeUpstream().then(*answers("a"), *answers("b"))
    folder = tmp_path / "rec"
    with running(fake.app) as upstream:
        serve = [sys.executable, "-m", "proxy", "serve", "--port", "0", "--workers", "2"]
        serve += ["--store", f"sqlite:///{tmp_path / 'state.db'}", "--insecure-admin"]
        process = subprocess.Popen(
            [*serve, "--upstream", upstream + "/v1", "--record-dir", str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert "listening on " in line, line
            url = line.rsplit("listening on ", 1)[1].strip()  # bound: requests queue from now
            # a connection per request, so that the workers take turns, as the kernel hands them
            headers = {"x-session-affinity": "ses_workers", "connection": "close"}
            first = agent_run(url, **headers)
            second = agent_run(url, **headers)
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=GUARD)
    assert first[-1] == "Done (a)." and second[-1] == "Done (b)."
    assert sorted(p.name for p in folder.iterdir()) == ["ses_workers.2.jsonl", "ses_workers.jsonl"]
    assert calls_of(folder / "ses_workers.jsonl") == ["call_a_1", "call_a_2"]
    assert calls_of(folder / "ses_workers.2.jsonl") == ["call_b_1", "call_b_2"]
