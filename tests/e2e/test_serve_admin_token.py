"""`replay-proxy serve` is never without an admin token unless its operator says so: with none
given it makes one, writes it where only its user can read it and says where; placeholders are
refused before anything binds."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from proxy.admin_token import weak_token
from tests.conftest import ROOT

EXAMPLE = str(ROOT / "examples" / "greeting.json")


@contextmanager
def started(*flags: str, env: dict[str, str] | None = None) -> Iterator[tuple[str, str]]:
    """serve on a free port; yields (its root URL, its second start line)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", "--trajectory", EXAMPLE, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    assert process.stdout is not None
    try:
        first, second = process.stdout.readline(), process.stdout.readline()
        assert "listening on " in first, first + second
        yield first.rsplit("listening on ", 1)[1].strip().removesuffix("/v1"), second
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_with_no_token_given_serve_makes_one_and_says_where(tmp_path: Path) -> None:
    path = tmp_path / "secret" / "token"
    with started("--admin-token-file", str(path)) as (root, described):
        token = path.read_text().strip()
        refused = httpx.get(root + "/replay/sessions")
        wrong = httpx.get(root + "/replay/sessions", headers={"authorization": "Bearer x" * 3})
        allowed = httpx.get(root + "/replay/sessions", headers={"authorization": f"Bearer {token}"})
        mode = stat.S_IMODE(path.stat().st_mode)
    assert f"admin token in {path}" in described and token not in described
    assert weak_token(token) is None and mode == 0o600
    assert refused.status_code == 401 and wrong.status_code == 401 and allowed.status_code == 200
    assert not path.exists()  # taken away when the proxy stops (it was sent SIGTERM)


@pytest.mark.parametrize("lines", [0, 1, 2])
def test_the_token_file_goes_with_the_proxy_on_ctrl_c_at_any_moment(
    tmp_path: Path, lines: int
) -> None:
    """A Ctrl-C right after the start, or once it has said where it listens, or once it has
    named the file (under load, uvicorn may not have taken the signal over yet)."""
    path = tmp_path / "token"
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", "--admin-token-file", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert process.stdout is not None
    for _ in range(lines):
        assert "replay-proxy:" in process.stdout.readline()
    if lines == 2:
        assert path.exists()  # written before the line that names it
    process.send_signal(signal.SIGINT)
    _, errors = process.communicate(timeout=120)
    assert "Traceback" not in errors
    assert not path.exists()


def test_the_token_file_goes_to_the_users_runtime_folder_by_default(tmp_path: Path) -> None:
    with started(env={"XDG_RUNTIME_DIR": str(tmp_path)}) as (root, described):
        port = root.rsplit(":", 1)[1]
        path = tmp_path / "replay-proxy" / f"admin-token-{port}"
        token = path.read_text().strip()
        status = httpx.get(root + "/replay/sessions", headers={"authorization": f"Bearer {token}"})
    assert f"admin token in {path}" in described and status.status_code == 200


def test_workers_share_the_token_made_at_start(tmp_path: Path) -> None:
    path = tmp_path / "token"
    store = f"sqlite:///{tmp_path / 'state.db'}"
    with started("--admin-token-file", str(path), "--workers", "2", "--store", store) as (root, _):
        token = path.read_text().strip()
        answers = [
            # new connections: the kernel spreads them over the workers, one of which may still
            # be importing on a loaded machine (its connection waits in the listen queue)
            httpx.get(
                root + "/replay/sessions",
                headers={"authorization": f"Bearer {token}"},
                timeout=120,
            )
            for _ in range(6)
        ]
    assert [a.status_code for a in answers] == [200] * 6


def test_the_operator_may_serve_the_admin_api_without_a_token() -> None:
    with started("--insecure-admin") as (root, described):
        status = httpx.get(root + "/replay/sessions")
    assert "admin API without a token (--insecure-admin)" in described
    assert status.status_code == 200


@pytest.mark.parametrize(
    ("flags", "env", "says"),
    [
        (("--admin-token", "change-me"), {}, "--admin-token: the admin token is a placeholder"),
        (
            (),
            {"REPLAY_PROXY_ADMIN_TOKEN": "REPLACE-ME-with-a-long-random-token"},
            "REPLAY_PROXY_ADMIN_TOKEN: the admin token is a placeholder",
        ),
        (("--admin-token", "s3cret"), {}, "--admin-token: the admin token is too easy to guess"),
    ],
)
def test_a_placeholder_token_stops_start_up(
    flags: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    stopped = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", *flags],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    assert stopped.returncode == 2 and stopped.stdout == ""
    assert stopped.stderr.startswith(f"replay-proxy: {says}")
    secret = flags[1] if flags else env["REPLAY_PROXY_ADMIN_TOKEN"]
    assert secret not in stopped.stderr  # a token, even a bad one, is never printed


def test_a_token_file_that_cannot_be_written_stops_start_up(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    stopped = subprocess.run(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", "--admin-token-file",
         str(blocked / "token")],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert stopped.returncode == 2
    assert "cannot write the admin token made at start" in stopped.stderr
    assert "--insecure-admin" in stopped.stderr
