"""docs/github-actions.yml, the CI recipe users copy: its check step's script, taken from the YAML
and run by bash exactly as GitHub Actions runs a `shell: bash` step (only the proxy's port put in),
against a real `replay-proxy serve --mode strict` on a free port, after the example agent
(examples/agent.py) ran against it. It must fail on a diverged session, naming the session, the
step, the JSON path and the verdict; fail on a session strict mode refused, saying so; and pass on
a clean, complete replay."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.app import create_app
from proxy.config import Settings
from tests.conftest import ROOT
from tests.helpers.servers import FakeUpstream, running, text, tool_call

WORKFLOW = ROOT / "docs" / "github-actions.yml"
START = "Start the proxy (strict replay of the recording)"
CHECK = "Every session replayed completely, with no divergence"
PORT = "127.0.0.1:8080"  # the workflow's; the test's proxy listens on a free port instead
TOKEN_FILE = ".replay-admin-token"
GUARD = 120.0  # seconds: only a failure guard, never a pace the test relies on
AGENT_TASK = "Write hello to out.txt, then list the folder."


def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def step(name: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = workflow()["jobs"]["replay"]["steps"]
    [found] = [s for s in steps if s.get("name") == name]
    return found


def agent(
    base_v1: str, session: str, work: Path, task: str = AGENT_TASK
) -> subprocess.CompletedProcess[str]:
    """The example agent, run as the workflow's "your agent, unchanged": it runs the bash
    commands it is given in `work` for real."""
    work.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "OPENAI_BASE_URL": base_v1,
        "OPENAI_API_KEY": "unused",
        "AGENT_SESSION": session,
        "AGENT_WORKDIR": str(work),
        "AGENT_TASK": task,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "agent.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of the example agent, recorded by the proxy: two bash steps, then its answer."""
    folder = tmp_path_factory.mktemp("recorded")
    fake = FakeUpstream().then(
        tool_call("bash", '{"command": "echo hello > out.txt"}', "call_rec_1"),
        tool_call("bash", '{"command": "ls"}', "call_rec_2"),
        text("Wrote hello to out.txt."),
    )
    with running(fake.app) as upstream:
        app = create_app(
            Settings(upstream=upstream + "/v1", record_dir=folder / "runs", insecure_admin=True)
        )
        with running(app) as url:
            ran = agent(url + "/v1", "recorded", folder / "work")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return folder / "runs" / "recorded.jsonl"


def _token_flags() -> list[str]:
    """How the workflow gives the proxy its token: --admin-token-file, where the proxy writes the
    token it makes. A proxy without that flag is given one with --admin-token, written to the same
    file, so that the step reads it the same way."""
    usage = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=GUARD,
        check=True,
    ).stdout
    if "--admin-token-file" in usage:
        return ["--admin-token-file", TOKEN_FILE]
    return ["--admin-token", secrets.token_hex(16)]


@contextmanager
def strict_proxy(recording: Path, workspace: Path) -> Iterator[int]:
    """`replay-proxy serve --mode strict` on the recording, started in the job's workspace (where
    the token file goes) on a free port; yields the port."""
    flags = _token_flags()
    serve = [sys.executable, "-m", "proxy", "serve", "--port", "0", "--mode", "strict"]
    with (workspace / "proxy.log").open("w") as log:  # its request log, as the workflow keeps it
        process = subprocess.Popen(
            [*serve, "--trajectory", str(recording), *flags],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=workspace,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the start line: the socket is bound
        assert "listening on http://127.0.0.1:" in line, line
        if flags[0] == "--admin-token":
            (workspace / TOKEN_FILE).write_text(flags[1])
        yield int(line.rsplit(":", 1)[1].removesuffix("/v1\n"))
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=GUARD)


def run_check(port: int, workspace: Path) -> subprocess.CompletedProcess[str]:
    """The check step's script, exactly as written but for the port, run as GitHub Actions runs
    a `shell: bash` step: bash --noprofile --norc -eo pipefail {0}, in the workspace."""
    script = step(CHECK)["run"]
    assert PORT in script
    path = workspace / "check-step.sh"
    path.write_text(script.replace(PORT, f"127.0.0.1:{port}"))
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )


def test_every_step_runs_in_bash_and_the_proxy_writes_its_token_where_the_check_reads_it() -> None:
    assert workflow()["jobs"]["replay"]["defaults"]["run"]["shell"] == "bash"
    start = step(START)["run"]
    assert "--mode strict" in start and f"--admin-token-file {TOKEN_FILE}" in start
    assert f'-H "Authorization: Bearer $(cat {TOKEN_FILE})"' in step(CHECK)["run"]


def test_a_clean_complete_replay_passes(recording: Path, tmp_path: Path) -> None:
    with strict_proxy(recording, tmp_path) as port:
        ran = agent(f"http://127.0.0.1:{port}/v1", "ci-clean", tmp_path / "work")
        assert ran.returncode == 0, ran.stdout + ran.stderr
        check = run_check(port, tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "ci-clean: served, 3/3 turns served" in check.stdout
    assert "FAILED" not in check.stdout and check.stderr == ""


def test_a_diverged_session_fails_naming_the_session_step_path_and_verdict(
    recording: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "stray.txt").write_text("left over\n")  # so that `ls` says more than it did
    with strict_proxy(recording, tmp_path) as port:
        ran = agent(f"http://127.0.0.1:{port}/v1", "ci-diverged", work)
        assert ran.returncode == 1 and "HTTP 404" in ran.stderr, ran.stdout + ran.stderr
        check = run_check(port, tmp_path)
    said = check.stdout + check.stderr
    assert check.returncode == 1, said
    assert "Error" not in check.stderr, said  # it failed on purpose, not by a bug of its own
    diverged, stopped = [line for line in check.stdout.splitlines() if line.startswith("FAILED")]
    assert diverged.startswith("FAILED ci-diverged: diverged at step 3, verdict changed: "), said
    assert " at messages[5].content: " in diverged and "stray.txt" in diverged, said
    assert stopped == "FAILED ci-diverged: did not replay completely: turn 3 of 3 not served"


def test_a_session_strict_mode_refused_fails_saying_so(recording: Path, tmp_path: Path) -> None:
    with strict_proxy(recording, tmp_path) as port:
        # the recording's one run is taken by the first session; the second, another task, has
        # none to replay
        clean = agent(f"http://127.0.0.1:{port}/v1", "ci-first", tmp_path / "first")
        assert clean.returncode == 0, clean.stdout + clean.stderr
        other = "Write goodbye to out.txt."
        refused = agent(f"http://127.0.0.1:{port}/v1", "ci-second", tmp_path / "second", other)
        assert refused.returncode == 1 and "HTTP 404" in refused.stderr, refused.stderr
        check = run_check(port, tmp_path)
    said = check.stdout + check.stderr
    assert check.returncode == 1 and "Error" not in check.stderr, said
    assert "ci-first: served, 3/3 turns served" in check.stdout, said
    failed = [line for line in check.stdout.splitlines() if line.startswith("FAILED")]
    assert failed == [
        "FAILED ci-second: refused: strict replay has no recording for this session "
        "(1 request refused)"
    ], said
