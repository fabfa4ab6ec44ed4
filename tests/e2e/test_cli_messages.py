"""What a newcomer meets on the command line: errors that name the fix, warnings for setups that
cannot work, a start line that says what runs, and quiet exits. Real processes, real signals."""

from __future__ import annotations

import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

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


GUARD = 120.0  # seconds: only a failure guard (a hung process), never a pace the test relies on
# a token of our own, so that no run writes one under the user's HOME, and the start lines say
# only what the tests look for
TOKEN = secrets.token_hex(16)


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", "--admin-token", TOKEN, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def _read_until(stream: IO[bytes], marker: bytes) -> bytes:
    """What `stream` said up to and including the first line holding `marker` (all of it, if
    the stream ends first). Read without a buffer of its own, so that what follows stays in the
    pipe for communicate(); a process that neither says it nor ends fails the test at GUARD."""
    said = b""
    deadline = time.monotonic() + GUARD
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while (at := said.find(marker)) < 0 or b"\n" not in said[at:]:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                pytest.fail(f"nothing with {marker!r} within {GUARD} s; said: {said[-2000:]!r}")
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                break
            said += chunk
    return said


def _ended(process: subprocess.Popen[bytes], job: int | None = None) -> tuple[str, str, int]:
    """stdout, stderr and the exit of a process that was told to stop; waited for, and failed
    (killed, and `job`, its shell's background job, with it) only if it is still running after
    GUARD seconds."""
    try:
        out, err = process.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        if job is not None:
            os.kill(job, signal.SIGKILL)  # it holds the pipes open: communicate() would wait on
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"still running {GUARD} s after SIGINT\n{out.decode()}\n{err.decode()}")
    return out.decode(errors="replace"), err.decode(errors="replace"), process.returncode


def _started(*args: str, env: dict[str, str] | None = None) -> tuple[str, str, int]:
    """Start serve, read its start lines, stop it with Ctrl-C (SIGINT): stdout, stderr, exit."""
    process = _serve(*args, env=env)
    assert process.stdout is not None and process.stderr is not None
    said = _read_until(process.stdout, b"status page ")
    # the warnings come after the start lines: Ctrl-C once uvicorn says the server is up
    warned = _read_until(process.stderr, b"Application startup complete")
    process.send_signal(signal.SIGINT)
    out, err, code = _ended(process)
    return said.decode() + out, warned.decode() + err, code


def _quiet(err: str) -> bool:
    return "Traceback" not in err and "KeyboardInterrupt" not in err and "Fatal" not in err


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
    assert code == 130 and _quiet(err), err


def test_ctrl_c_the_moment_it_is_started_is_quiet() -> None:
    process = _serve("--trajectory", str(TRAJ))
    process.send_signal(signal.SIGINT)
    _, err, code = _ended(process)
    # -SIGINT: the signal came before Python had set up its handler, and ended it as a shell's
    # Ctrl-C ends any program (the shell reports 130 for both)
    assert code in (130, -signal.SIGINT) and _quiet(err), (code, err)


def test_ctrl_c_while_the_command_line_is_being_imported_is_quiet() -> None:
    # Python says on stderr each module it has imported (PYTHONPROFILEIMPORTTIME): SIGINT goes as
    # soon as argparse, the command line's first import, is in and the rest is still loading
    process = _serve("--trajectory", str(TRAJ), env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert process.stderr is not None
    _read_until(process.stderr, b" argparse\n")
    process.send_signal(signal.SIGINT)
    _, err, code = _ended(process)
    assert code == 130 and _quiet(err), err[-3000:]


# serve as a script's background job (`replay-proxy serve ... &`): a shell without job control
# starts it with SIGINT ignored; the shell says the job's pid on fd N and exits with its status
BACKGROUND = '"$@" {fd}>&- & echo "$!" >&{fd}; exec {fd}>&-; wait "$!"'


def _in_background(*args: str) -> tuple[subprocess.Popen[bytes], int]:
    """The shell (which exits with the job's status) and the job's pid."""
    said, told = os.pipe()
    serve = [sys.executable, "-m", "proxy", "serve", "--port", "0", "--admin-token", TOKEN, *args]
    shell = subprocess.Popen(
        ["bash", "-c", BACKGROUND.format(fd=told), "bash", *serve],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        pass_fds=(told,),
    )
    os.close(told)
    with os.fdopen(said) as pid:
        return shell, int(pid.read())


def _ignores_sigint(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status").read_text()
    ignored = next(line for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1)))


def test_a_background_job_stops_on_sigint_right_after_its_start_line() -> None:
    shell, pid = _in_background("--trajectory", str(TRAJ))
    assert shell.stdout is not None
    _read_until(shell.stdout, b"status page ")
    os.kill(pid, signal.SIGINT)
    _, err, code = _ended(shell, pid)
    assert code == 130 and _quiet(err), err


def test_a_background_job_stops_on_sigint_as_soon_as_it_no_longer_ignores_it() -> None:
    shell, pid = _in_background("--trajectory", str(TRAJ))
    deadline = time.monotonic() + GUARD
    while _ignores_sigint(pid):  # the process's own state, read until it changes
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            shell.communicate()
            pytest.fail(f"SIGINT still ignored {GUARD} s after the start")
        os.sched_yield()
    os.kill(pid, signal.SIGINT)
    _, err, code = _ended(shell, pid)
    assert code == 130 and _quiet(err), err


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
