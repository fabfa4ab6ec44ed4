"""Record a run, replay it strictly with no model, and report exactly where a run diverges."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from proxy.formats import load_file
from tests.conftest import ROOT, ProxyFactory
from tests.helpers.agent import SYSTEM, TASK, agent_step, bash, client, follow, ran, start_messages
from tests.helpers.servers import FakeUpstream, text, tool_call

TITLE = [
    {"role": "system", "content": "You are a title generator."},
    {"role": "user", "content": TASK},
]


def record_run(url: str, session: str, *, stream: bool) -> list[dict[str, Any]]:
    """A two-step agent loop plus a tool-less title call; returns what the agent received."""
    c = client(url, **{"x-session-affinity": session})
    title = c.chat.completions.create(model="small", messages=TITLE).choices[0].message.content
    messages = start_messages()
    got = []
    while True:
        message, _ = agent_step(c, messages, stream=stream)
        got.append({"content": message["content"], "tool_calls": message["tool_calls"]})
        if not message["tool_calls"]:
            break
        follow(messages, message)
    return [{"title": title}, *got]


def script_upstream(fake: FakeUpstream) -> None:
    fake.then(
        text("Notes title"),
        tool_call("bash", '{"command": "touch notes.txt"}', "call_rec_1"),
        tool_call("bash", '{"command":"ls -la"}', "call_rec_2"),
        text("Created notes.txt."),
    )


@pytest.fixture
def recording(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> Callable[[bool], tuple[Path, list[dict[str, Any]]]]:
    def make(stream: bool) -> tuple[Path, list[dict[str, Any]]]:
        fake, upstream_url = upstream
        script_upstream(fake)
        folder = tmp_path / "rec"
        with proxy(
            upstream=upstream_url, upstream_api_key="sk-upstream-secret-1", record_dir=folder
        ) as url:
            got = record_run(url, "ses_rec", stream=stream)
        return folder / "ses_rec.jsonl", got

    return make


@pytest.mark.parametrize("stream", [False, True])
def test_record_then_replay_strictly_with_no_model(
    stream: bool,
    recording: Callable[[bool], tuple[Path, list[dict[str, Any]]]],
    proxy: ProxyFactory,
) -> None:
    path, recorded_answers = recording(stream)
    text_ = path.read_text()
    lines = [json.loads(line) for line in text_.splitlines()]
    assert [(x["lane"], x["source"], x["status"]) for x in lines] == [
        ("toolless", "upstream", 200),
        ("main", "upstream", 200),
        ("main", "upstream", 200),
        ("main", "upstream", 200),
    ]
    assert lines[1]["message"]["tool_calls"][0]["id"] == "call_rec_1"
    assert lines[1]["stream"] is stream and (lines[1]["events"] is not None) is stream
    assert all(x["ttfb_ms"] is not None and x["duration_ms"] >= x["ttfb_ms"] for x in lines)
    for secret in ("sk-client-key", "sk-upstream-secret-1", "authorization", "Bearer"):
        assert secret not in text_

    t = load_file(path)
    assert t.format == "recording" and [len(turn.tool_calls) for turn in t.turns] == [1, 1, 0]
    assert t.turns[1].tool_calls[0].arguments == '{"command":"ls -la"}'

    # no upstream at all: strict mode answers everything from the recording
    with proxy(trajectory=[path], mode="strict") as url:
        replayed = record_run(url, "ses_ci", stream=stream)
        status = httpx.get(url.removesuffix("/v1") + "/replay/sessions/ses_ci").json()
    assert replayed == recorded_answers
    assert status["turns_served"] == 3 and status["divergences"] == 0


def test_a_changed_tool_result_fails_with_the_path_and_the_text_around_it(
    recording: Callable[[bool], tuple[Path, list[dict[str, Any]]]], proxy: ProxyFactory
) -> None:
    path, _ = recording(False)
    with proxy(trajectory=[path], mode="strict") as url:
        c = client(url, **{"x-session-affinity": "ses_ci"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=False)
        follow(messages, first, output=lambda call: ran(call).replace("touch", "TOUCH"))
        with pytest.raises(openai.NotFoundError) as caught:
            agent_step(c, messages, stream=False)
    error = caught.value.body
    assert isinstance(error, dict)
    message = error["message"]
    assert message.startswith("strict replay: session ses_ci, lane main, step 2/3 of 'ses_rec'")
    assert error["param"] == "messages[3].content"
    assert '\n  recorded: "ran {"command": "touch notes.txt"}" (at character 17)\n' in message
    assert '\n  now:      "ran {"command": "TOUCH notes.txt"}" (at character 17)\n' in message
    # a changed tool result is no date or temporary path: it fails as "changed"
    assert message.endswith(
        "\n  verdict:  changed (no mask a harness preset or the proxy knows explains it)"
    )
    assert error["replay"]["verdict"] == "changed" and "masks" not in error["replay"]


def test_a_miss_names_the_closest_recorded_request(
    recording: Callable[[bool], tuple[Path, list[dict[str, Any]]]], proxy: ProxyFactory
) -> None:
    path, _ = recording(True)
    with proxy(trajectory=[path], mode="strict") as url:
        c = client(url, **{"x-session-affinity": "ses_ci"})
        other = [TITLE[0], {"role": "user", "content": TASK + " Quickly."}]
        with pytest.raises(openai.NotFoundError) as caught:
            c.chat.completions.create(model="small", messages=other)
        again = c.chat.completions.create(model="small", messages=TITLE).choices[0].message.content
        with pytest.raises(openai.NotFoundError) as used_up:
            c.chat.completions.create(model="small", messages=TITLE)
    error = caught.value.body
    assert isinstance(error, dict)
    assert "lane toolless: no unused recorded toolless request matches this one" in error["message"]
    assert "the closest is line 1" in error["message"] and error["param"] == "messages[1].content"
    assert error["replay"]["closest_line"] == 1
    assert again == "Notes title"  # the equal request is answered once...
    assert "no unused recorded toolless request" in str(used_up.value)  # ...and only once


def test_a_step_beyond_the_recording_is_an_error(
    recording: Callable[[bool], tuple[Path, list[dict[str, Any]]]], proxy: ProxyFactory
) -> None:
    path, _ = recording(False)
    with proxy(trajectory=[path], mode="strict") as url:
        c = client(url, **{"x-session-affinity": "ses_ci"})
        messages = start_messages()
        for _ in range(3):
            message, _ = agent_step(c, messages, stream=False)
            follow(messages, message)
        messages.append({"role": "user", "content": "one more thing"})
        with pytest.raises(openai.NotFoundError) as caught:
            agent_step(c, messages, stream=False)
    assert "asked for step 4 but" in caught.value.message and "holds only 3" in caught.value.message


RESUME = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": TASK},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [bash("call_A", "touch notes.txt"), bash("call_B", "date")],
    },
    {"role": "tool", "tool_call_id": "call_A", "content": ""},
    {"role": "tool", "tool_call_id": "call_B", "content": '{"now": "2026-01-01", "ok": true}'},
]


def test_resume_mode_reports_tool_results_unlike_the_recorded_ones(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], write_trajectory: Callable[..., Path]
) -> None:
    _, upstream_url = upstream
    outputs = {"call_A": "", "call_B": '{"ok": true,  "now": "2026-12-02"}'}
    with proxy(upstream=upstream_url, trajectory=[write_trajectory(RESUME)]) as url:
        c = client(url, **{"x-session-affinity": "s_obs"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=False)
        follow(messages, first, output=lambda call: outputs[call["id"]])
        _, headers = agent_step(c, messages, stream=False)  # warn (the default): goes on
        status = httpx.get(url.removesuffix("/v1") + "/replay/sessions/s_obs").json()
    assert headers["x-replay-source"] == "upstream"
    first_diff = status["observations"]["first"]
    assert status["observations"]["differing"] == 1
    assert first_diff["path"] == "messages[4].content.now"  # JSON output compared by value
    assert first_diff["expected"].startswith('"2026-01-01"') and first_diff["actual"].startswith(
        '"2026-12-02"'
    )
    with proxy(
        upstream=upstream_url, trajectory=[write_trajectory(RESUME)], mask=[r"\d{4}-\d\d-\d\d"]
    ) as url:
        c = client(url, **{"x-session-affinity": "s_masked"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=False)
        follow(messages, first, output=lambda call: outputs[call["id"]])
        agent_step(c, messages, stream=False)
        masked = httpx.get(url.removesuffix("/v1") + "/replay/sessions/s_masked").json()
    assert masked["observations"] == {"differing": 0, "first": None}
    with proxy(
        upstream=upstream_url,
        trajectory=[write_trajectory(RESUME)],
        on_observation_divergence="error",
    ) as url:
        c = client(url, **{"x-session-affinity": "s_err"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=False)
        follow(messages, first, output=lambda call: outputs[call["id"]])
        with pytest.raises(openai.NotFoundError, match="differs from the recorded output"):
            agent_step(c, messages, stream=False)


def test_after_script_stop_reports_a_missing_tool_result(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path]
) -> None:
    with proxy(trajectory=[write_trajectory(RESUME)], after_script="stop") as url:
        c = client(url, **{"x-session-affinity": "s_stop"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=True)
        follow(messages, first, output=lambda call: "done" if call["id"] == "call_A" else None)
        final, headers = agent_step(c, messages, stream=True)
        status = httpx.get(url.removesuffix("/v1") + "/replay/sessions/s_stop").json()
    assert (
        headers["x-replay-source"] == "stop"
        and final["finish"] == "stop"
        and not final["tool_calls"]
    )
    assert "--after-script stop" in final["content"]
    assert status["phase"] == "stopped" and status["complete"] is False
    assert status["tool_results"]["calls"] == [
        {"turn": 1, "id": "call_A", "name": "bash", "result_returned": True},
        {"turn": 1, "id": "call_B", "name": "bash", "result_returned": False},
    ]
    with proxy(trajectory=[write_trajectory(RESUME)], after_script="stop") as url:
        c = client(url, **{"x-session-affinity": "s_all"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=False)
        follow(messages, first)
        agent_step(c, messages, stream=False)
        complete = httpx.get(url.removesuffix("/v1") + "/replay/sessions/s_all").json()
    assert complete["complete"] is True and complete["tool_results"]["returned"] == 2


LATER_USER = [*RESUME, {"role": "user", "content": "Now check the date again."}]


def test_dumps_hold_live_completions_only_in_order_and_whole_when_the_stream_ends(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
    tmp_path: Path,
) -> None:
    fake, upstream_url = upstream
    fake.then(tool_call("bash", '{"command": "date"}', "call_live_1"), text("All done."))
    dumps = tmp_path / "dumps"
    with proxy(
        upstream=upstream_url, trajectory=[write_trajectory(LATER_USER)], dump_dir=dumps
    ) as url:
        c = client(url, **{"x-session-affinity": "s_dump"})
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=True)  # scripted: never dumped
        follow(messages, first)
        assert list(dumps.iterdir()) == []
        prefix = len(messages)
        live, _ = agent_step(c, messages, stream=True)
        # the client has read the whole stream: the dump must already be complete on disk
        [dumped] = sorted(dumps.iterdir())
        assert (
            json.loads(dumped.read_text())["response"]["choices"][0]["message"]["tool_calls"][0][
                "id"
            ]
            == "call_live_1"
        )
        follow(messages, live)
        agent_step(c, messages, stream=False)
    files = sorted(dumps.iterdir())
    assert [f.name for f in files] == ["0000000001-s_dump.json", "0000000002-s_dump.json"]
    one, two = (json.loads(f.read_text()) for f in files)
    assert one["replay_prefix_message_count"] == two["replay_prefix_message_count"] == prefix
    assert one["session_id"] == "s_dump" and one["parent_session_id"] is None and one["turn"] == 2
    assert one["messages"][-1] == {
        "role": "user",
        "content": "Now check the date again.",
    }  # spliced
    assert two["response"]["choices"][0]["message"]["content"] == "All done."
    assert not [f for f in dumps.iterdir() if f.name.startswith(".")]  # no temp files left


def test_the_recording_of_a_killed_proxy_loads(
    upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    fake, upstream_url = upstream
    script_upstream(fake)
    folder = tmp_path / "rec"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxy",
            "serve",
            "--port",
            "0",
            "--upstream",
            upstream_url,
            "--record-dir",
            str(folder),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().rsplit("listening on ", 1)[1].strip()
        c = client(url, **{"x-session-affinity": "ses_kill"})
        c.chat.completions.create(model="small", messages=TITLE)
        messages = start_messages()
        first, _ = agent_step(c, messages, stream=True)
        follow(messages, first)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    path = folder / "ses_kill.jsonl"
    t = load_file(path)
    assert [turn.tool_calls[0].id for turn in t.turns] == ["call_rec_1"]
    # a crash in the middle of a line: that line is skipped, with a warning, and the rest loads
    with path.open("ab") as f:
        f.write(b'{"type": "exchange", "v": 1, "session": "ses_kill", "lane": "ma')
    t = load_file(path)
    assert len(t.turns) == 1
    assert any("cut off (the file ends mid-line)" in note.reason for note in t.skipped)


def test_diff_reports_the_first_divergence_per_lane(
    recording: Callable[[bool], tuple[Path, list[dict[str, Any]]]], tmp_path: Path
) -> None:
    path, _ = recording(False)
    lines = path.read_text().splitlines()
    changed = json.loads(lines[2])
    changed["request"]["messages"][3]["content"] = "ran something else"
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join([lines[0], lines[1], json.dumps(changed), lines[3]]) + "\n")
    run = subprocess.run(
        [sys.executable, "-m", "proxy", "diff", str(path), str(other)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert run.returncode == 1
    assert run.stdout.startswith("lane main, step 2: the request differs at messages[3].content\n")
    same = subprocess.run(
        [sys.executable, "-m", "proxy", "diff", str(path), str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert same.returncode == 0 and "agree step for step" in same.stdout


def test_a_session_strict_mode_refuses_is_counted_refused_and_logged(
    proxy: ProxyFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Strict mode never forwards: a session it has no recording for is an error in its status
    and its timeline, a WARNING in the log, and never 'forwarded'."""
    caplog.set_level(logging.INFO)
    with proxy(mode="strict") as url:
        c = client(url, **{"x-session-affinity": "ses_other"})
        with pytest.raises(openai.NotFoundError):
            agent_step(c, start_messages(), stream=False)
        root = url.removesuffix("/v1")
        state = httpx.get(root + "/replay/sessions/ses_other").json()
        page = httpx.get(root + "/replay/ui").text
    assert state["errors"] == 1 and state["forwarded"] == {"main": 0, "toolless": 0, "subagent": 0}
    assert state["live_upstream"] is None and state["live_since"] is None
    assert "strict replay: no recording to replay" in page  # the timeline's refused chip
    logs = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (
        logging.WARNING,
        "session=ses_other refused: strict replay has no recording for it (no script)",
    ) in logs
    assert any(
        level == logging.INFO and "/v1/chat/completions -> 404 " in text and "strict replay" in text
        for level, text in logs
    )


def test_a_divergence_is_a_warning_with_the_step_and_the_path(
    recording: Callable[[bool], tuple[Path, list[dict[str, Any]]]],
    proxy: ProxyFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path, _ = recording(False)
    caplog.set_level(logging.INFO)
    with proxy(trajectory=[path], mode="strict") as url:
        c = client(url, **{"x-session-affinity": "ses_ci"})
        messages = start_messages()
        message, _ = agent_step(c, messages, stream=False)
        follow(messages, message)
        messages[-1]["content"] = "a different tool result"
        with pytest.raises(openai.NotFoundError):
            agent_step(c, messages, stream=False)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        w.startswith("session=ses_ci diverged at step 2 of 3: ") and "messages[" in w
        for w in warned
    ), warned
