"""What a newcomer meets on the command line: errors that name the fix, warnings for setups that
cannot work, a start line that says what runs, and quiet exits. Real processes, real signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.e2e.test_cli import TRAJ, run


def test_version_and_a_bad_flag_told_with_its_commands_usage() -> None:
    from proxy import __version__

    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"replay-proxy {__version__}"
    for command in ("serve", "check"):
        bad = run(command, "--nope", str(TRAJ))
        assert bad.returncode == 2
        assert f"replay-proxy {command}: error: unrecognized arguments: --nope" in bad.stderr
        assert f"usage: replay-proxy {command}" in bad.stderr


def test_health_takes_a_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = run("health", "--port", str(port))
    assert down.returncode == 1 and f"http://127.0.0.1:{port}/healthz" in down.stderr


def test_a_busy_port_and_a_folder_given_as_a_file_name_their_fix(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        taken = run("serve", "--port", str(port), "--trajectory", str(TRAJ))
    assert taken.returncode == 2
    assert (
        "Address already in use" in taken.stderr
        and "--port N (or REPLAY_PROXY_PORT)" in taken.stderr
    )
    folder = run("serve", "--port", "0", "--trajectory", str(ROOT / "examples"))
    assert folder.returncode == 1
    assert f"with --trajectory-dir {ROOT / 'examples'}" in folder.stderr
    assert len(folder.stderr) < 300  # one line, not every format it tried
    unwritable = run("serve", "--port", "0", "--record-dir", "/proc/replay-proxy")
    assert unwritable.returncode == 2 and "Traceback" not in unwritable.stderr
    assert "--record-dir /proc/replay-proxy: cannot create it" in unwritable.stderr


def _started(*args: str, env: dict[str, str] | None = None) -> tuple[str, str, int]:
    """Start serve, read its start lines, stop it with Ctrl-C (SIGINT): stdout, stderr, exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    second = process.stdout.readline()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    return first + second + out, err, process.returncode


def test_the_start_lines_say_what_runs_and_ctrl_c_is_quiet(tmp_path: Path) -> None:
    out, err, code = _started(
        "--trajectory", str(TRAJ), "--record-dir", str(tmp_path / "rec"), "--fault", "2:429",
        env={"REPLAY_PROXY_TRAJECTORIES": "x.json"},
    )  # fmt: skip
    first, second = out.splitlines()[:2]
    assert "1 trajectories" in first and "listening on http://127.0.0.1:" in first
    root = first.rsplit("listening on ", 1)[1].removesuffix("/v1")
    assert second == (
        f"replay-proxy: mode resume; faults 2:429; recording to {tmp_path / 'rec'}; "
        f"status page {root}/replay/ui"
    )
    assert (
        "warning: REPLAY_PROXY_TRAJECTORIES is not a setting, ignored "
        "(did you mean REPLAY_PROXY_TRAJECTORY?)" in err
    )
    assert code == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err


def test_setups_that_can_only_fail_are_warned_about() -> None:
    _, strict, _ = _started("--mode", "strict")
    assert "warning: --mode strict with no --trajectory or --trajectory-dir" in strict
    _, nowhere, _ = _started()
    assert "nothing to replay and nowhere to forward" in nowhere
    _, fine, _ = _started("--trajectory", str(TRAJ))
    assert "warning" not in fine


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback() -> None:
    # more than a pipe holds, so that the writer meets the closed end
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "check", *[str(TRAJ)] * 3000],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(10)
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141 and err == ""
