"""The command line as a user runs it: a real process, real flags, real env vars."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import ROOT

TRAJ = ROOT / "examples" / "greeting.json"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`replay-proxy serve --port 0 ...`; yields the URL it prints once it is bound."""
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", "--insecure-admin", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until the server has bound its socket
        assert "listening on " in line, line + (process.stderr.read() if process.stderr else "")
        yield line.rsplit("listening on ", 1)[1].strip()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_check_describes_a_trajectory() -> None:
    result = run("check", str(TRAJ))
    assert result.returncode == 0
    out = result.stdout
    assert "chat, 3 turns in 1 round, 3 tool calls" in out
    assert "turn 1 (message 2): 1 tool call(s), reasoning" in out
    assert "user message 6 comes before turn 3 (spliced live)" in out
    assert "bash [call_greet_3]" in out


def test_check_json_and_reports_every_skip(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": ""},
                {"role": "assistant", "content": "done"},
                {"role": "assistant", "content": "and more"},
                {"role": "user", "content": "again?"},
                {"role": "assistant", "content": "done again"},
                {"role": "user", "content": "thanks"},
            ]
        )
    )
    text = run("check", str(path))
    out = text.stdout
    # no tool call anywhere: text-based, so the user messages between turns are observations
    assert "chat, 2 turns in 1 round, 0 tool calls" in out
    assert "  text-based: no turn calls a tool" in out
    assert "skipped message 1: empty assistant message" in out
    assert (
        "dropped message 3: assistant message right after the text-only turn (message 2) with no "
        "user message between" in out
    )
    assert "user message 4 is the observation of turn 1 (the harness sends it" in out
    assert "skipped message 6: the observation of the last turn, with no recorded answer" in out
    described = json.loads(run("check", "--json", str(path)).stdout)
    assert described[0]["text_based"] is True and described[0]["rounds"] == 1
    assert [t["round"] for t in described[0]["turns"]] == [1, 1]
    assert described[0]["turns"][1]["follow_up"] == [4]
    assert described[0]["turns"][0]["final"] is True
    assert described[0]["skipped"][0] == {
        "index": 1,
        "where": "message 1",
        "reason": "empty assistant message, followed by another answer",
    }

    # with a tool call, a user message after a text answer opens the next exchange
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                {"role": "assistant", "content": "done"},
                {"role": "user", "content": "again?"},
                {"role": "assistant", "content": "done again"},
                {"role": "user", "content": "thanks"},
            ]
        )
    )
    out = run("check", str(path)).stdout
    assert "chat, 3 turns in 2 rounds, 1 tool calls" in out and "text-based" not in out
    assert "user message 4 opens round 2 (the harness sends it; compared, not spliced)" in out
    assert "skipped message 6: a follow-up after the last answer, with no recorded answer" in out


def test_check_exits_1_with_file_and_index_on_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            [
                {"role": "user", "content": "t"},
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"name": "x", "arguments": "{"}}],
                },
            ]
        )
    )
    result = run("check", str(TRAJ), str(bad))
    assert result.returncode == 1
    assert result.stderr.startswith(f"{bad}:1: tool_calls[0].function.arguments is not valid JSON")
    assert "3 turns" in result.stdout  # the good file is still described


def test_serve_reports_bad_files_and_flags_before_binding(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    result = run("serve", "--trajectory", str(bad), "--port", "0")
    assert result.returncode == 1 and f"{bad}: not valid JSON" in result.stderr
    assert "listening" not in result.stdout
    flag = run("serve", "--upstream", "ftp://x", "--port", "0")
    assert flag.returncode == 2 and "--upstream" in flag.stderr and "not an http" in flag.stderr
    env = run("serve", env={"REPLAY_PROXY_ON_DIVERGENCE": "sometimes", "REPLAY_PROXY_PORT": "0"})
    assert env.returncode == 2 and "REPLAY_PROXY_ON_DIVERGENCE: " in env.stderr  # where it was set
    timeout = run("serve", "--read-timeout", "0", "--port", "0")
    assert timeout.returncode == 2 and "--read-timeout" in timeout.stderr
    socks = run(
        "serve", "--upstream", "http://llm.invalid/v1", "--port", "0",
        env={"ALL_PROXY": "socks5://user:pw@127.0.0.1:1080", "NO_PROXY": ""},
    )  # fmt: skip
    assert socks.returncode == 2 and "socks5://" in socks.stderr and "pw" not in socks.stderr
    negative = run("serve", "--replay-turns", "-1", "--port", "0")
    assert negative.returncode == 2 and "--replay-turns" in negative.stderr
    strict = run("serve", "--replay-turns", "3", "--mode", "strict", "--port", "0")
    assert strict.returncode == 2 and "--replay-turns needs --mode resume" in strict.stderr
    fault = run("serve", "--fault", "2:429", "--fault", "3:teapot", "--port", "0")
    assert fault.returncode == 2, fault.stderr
    assert "replay-proxy: --fault: '3:teapot': kind: Input should be '429', '500'" in fault.stderr
    assert "listening" not in fault.stdout
    stall = run("serve", "--port", "0", env={"REPLAY_PROXY_FAULT": "1:stall"})
    assert stall.returncode == 2 and "stall needs seconds" in stall.stderr


def test_serve_refuses_an_upstream_that_is_its_own_address() -> None:
    with socket.socket() as s:  # a free port, given back for the proxy to bind
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for upstream in (f"http://127.0.0.1:{port}/v1", f"http://localhost:{port}"):
        itself = run("serve", "--port", str(port), "--upstream", upstream)
        assert itself.returncode == 2, itself.stderr
        assert "is this proxy's own address" in itself.stderr and "listening" not in itself.stdout


def test_serve_help_lists_the_limits_and_timeouts_as_flags() -> None:
    text = run("serve", "--help").stdout
    for flag in (
        "--max-body-bytes",
        "--connect-timeout",
        "--read-timeout",
        "--total-timeout",
        "--keep-alive-timeout",
        "--shutdown-timeout",
    ):
        assert flag in text, flag


def test_serve_takes_the_limits_from_flags_and_environment(tmp_path: Path) -> None:
    """--max-body-bytes from a flag and a timeout from REPLAY_PROXY_*, both in force."""
    with serving("--max-body-bytes", "64", env={"REPLAY_PROXY_KEEP_ALIVE_TIMEOUT": "0.2"}) as url:
        big = httpx.post(
            url + "/chat/completions",
            content=b"{" + b" " * 100 + b"}",
            headers={"content-type": "application/json"},
        )
        root = url.removesuffix("/v1")
        host, port = root.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            answer = b""
            while chunk := sock.recv(65536):  # ends when the idle connection is closed
                answer += chunk
    assert big.status_code == 413 and "limit is 64" in big.json()["error"]["message"]
    assert answer.startswith(b"HTTP/1.1 200")


def test_serve_with_env_configuration_replays_the_bundled_example() -> None:
    env = {"REPLAY_PROXY_TRAJECTORY": str(TRAJ), "REPLAY_PROXY_ADMIN_TOKEN": "tok-Vb6Yc3Ke8Hs2Q"}
    with serving(env=env) as url:
        body = json.loads(TRAJ.read_text())
        request = {
            "model": "m",
            "messages": body[:2],
            "tools": [{"type": "function", "function": {"name": "bash", "parameters": {}}}],
        }
        r = httpx.post(url + "/chat/completions", json=request)
        assert r.headers["x-replay-turn"] == "1/3"
        assert r.json()["choices"][0]["message"]["tool_calls"][0]["id"] == "call_greet_1"
        admin = url.removesuffix("/v1") + "/replay/sessions"
        assert httpx.get(admin).status_code == 401
        assert (
            httpx.get(admin, headers={"authorization": "Bearer tok-Vb6Yc3Ke8Hs2Q"}).json()["data"][
                0
            ]["turns_served"]
            == 1
        )


def test_python_dash_m_and_the_console_script_are_the_same_program() -> None:
    script = Path(sys.executable).parent / "replay-proxy"
    result = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "serve" in result.stdout and "check" in result.stdout
    assert run("--help").stdout == result.stdout


def test_health_answers_without_loading_the_server() -> None:
    """A probe runs every few seconds: `health` must not import the server, aiohttp or redis."""
    code = (
        "import sys; from proxy.cli import main; "
        "rc = main(['health', '--url', 'http://127.0.0.1:1/healthz']); "
        "heavy = sorted(m for m in ('uvicorn', 'aiohttp', 'redis', 'fastapi', 'proxy.app') "
        "if m in sys.modules); print(rc, heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.stdout.strip() == "1 []", result.stdout + result.stderr


def test_convert_writes_chat_json_and_says_what_it_left_out(tmp_path: Path) -> None:
    source = tmp_path / "talk.json"
    source.write_text(
        json.dumps(
            [
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": "done"},
                {"role": "assistant", "content": "and more"},
                {"role": "user", "content": "again?"},
                {"role": "assistant", "content": "done again"},
            ]
        )
    )
    out = tmp_path / "out"
    result = run("convert", str(source), str(TRAJ), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert (
        f"{source} (chat) -> {out}/talk.json: 2 turns in 1 round, 0 tool calls, 0 tool outputs, "
        "text-based (the user messages between turns are observations)" in result.stdout
    )
    assert "  left out 2: assistant message right after the text-only turn" in result.stdout
    assert (out / "greeting.json").is_file()
    written = json.loads((out / "talk.json").read_text())
    assert [m["role"] for m in written] == ["user", "assistant", "user", "assistant"]
    reloaded = json.loads(run("check", "--json", str(out / "talk.json")).stdout)[0]
    assert reloaded["text_based"] and [t["follow_up"] for t in reloaded["turns"]] == [[], [2]]
    one = run("convert", str(source), "-o", str(tmp_path / "one.json"))
    assert one.returncode == 0 and (tmp_path / "one.json").is_file()
    two = run("convert", str(source), str(TRAJ), "-o", str(tmp_path / "two.json"))
    assert two.returncode == 2 and "2 trajectories to write: give a folder" in two.stderr


def test_check_json_reports_a_refused_file_with_its_reason(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"foo": 1}))
    result = run("check", "--json", str(TRAJ), str(bad))
    assert result.returncode == 1
    good, refused = json.loads(result.stdout)
    assert good["format"] == "chat"
    assert refused["filename"] == str(bad) and refused["index"] is None
    assert refused["error"].startswith("not a trajectory in a format this proxy reads")


def test_check_fails_a_file_it_mostly_drops_and_names_the_lines_of_a_rollout(
    tmp_path: Path,
) -> None:
    # a text answer, then steps with no user message between and no record of separate calls:
    # most of the file is dropped, so it is read wrongly, and CI must hear about it
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    mostly = tmp_path / "mostly.json"
    mostly.write_text(
        json.dumps(
            [
                {"role": "user", "content": "task"},
                {"role": "assistant", "content": "Hello."},
                *[{"role": "assistant", "content": None, "tool_calls": [call]}] * 2,
                *[{"role": "tool", "tool_call_id": "c1", "content": "out"}] * 2,
            ]
        )
    )
    result = run("check", str(mostly))
    assert result.returncode == 1
    assert f"{mostly}: mostly: 4 of its 6 messages were dropped" in result.stderr
    assert "dropped message 2: assistant message right after the text-only turn (message 1)" in (
        result.stdout
    )
    # a rollout's notes name the line and the item
    rollout = ROOT / "tests/fixtures/corpus/nemo-gym/tau2.jsonl"
    result = run("check", str(rollout))
    assert result.returncode == 0
    assert "turn 4 (line 1, response.output[0]): 1 tool call(s)" in result.stdout
    assert "skipped line 1, response.output[4]: a follow-up after the last answer" in result.stdout
    # a rollout that records token ids: check says each call's, as it will serve them
    tokened = ROOT / "tests/fixtures/corpus/nemo-gym/customer_service_env.jsonl"
    result = run("check", str(tokened))
    assert result.returncode == 0
    assert (
        "turn 1 (line 1, response.output[0]): text, 118 generated token ids, 32 prompt ids, "
        "logprobs (nemo-gym)"
    ) in result.stdout


def test_check_fails_a_rollout_file_most_of_whose_lines_it_cannot_read(tmp_path: Path) -> None:
    good = (ROOT / "tests/fixtures/corpus/nemo-gym/tau2.jsonl").read_text().strip()
    row = json.loads(good)
    transitions = json.dumps({**row, "response": {"output": [row["response"]["output"]]}})
    path = tmp_path / "rollouts.jsonl"
    path.write_text("\n".join([good, transitions, transitions]) + "\n")
    result = run("check", str(path))
    assert result.returncode == 1
    assert f"{path}: 2 of its 3 conversations could not be read" in result.stderr
    assert "skipped line 2: left out: line 2, response.output[0]: is a list" in result.stdout
