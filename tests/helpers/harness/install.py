"""Installing the harnesses into a cache folder that outlives a test run.

The cache is $REPLAY_PROXY_HARNESS_CACHE, else ~/.cache/replay-proxy/harnesses. The versions come
from versions.py; each version is installed in a folder of its own (`claude-2.1.332`,
`venv-mini-2.4.6`), so the oldest and newest tracks, and the pins of another checkout sharing the
cache, coexist instead of reinstalling over each other. npm installs run with a throw-away HOME:
opencode's postinstall runs the binary, which writes config into HOME.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.harness.versions import PINS, specs, version

CACHE = Path(
    os.environ.get("REPLAY_PROXY_HARNESS_CACHE", Path.home() / ".cache/replay-proxy/harnesses")
)


class Unavailable(Exception):
    """The harness cannot be installed on this machine (no npm, no Python 3.12, no registry)."""


def folder(name: str, track: str = "newest") -> Path:
    """Where this harness's version on this track is installed."""
    at = version(name, track)
    return CACHE / (f"{name}-{at}" if PINS[name].registry == "npm" else f"venv-{name}-{at}")


EXECUTABLES = {  # in the install folder
    "opencode": "node_modules/.bin/opencode",
    "codex": "node_modules/.bin/codex",
    "claude": "node_modules/.bin/claude",
    "gemini": "node_modules/.bin/gemini",
    "mini": "bin/mini",
    "agents": "bin/python",
    "openhands": "bin/python",
}


def executable(name: str, track: str = "newest") -> Path:
    return folder(name, track) / EXECUTABLES[name]


def python312() -> str | None:
    """A Python 3.12 or newer that really runs (a pyenv shim may exist and refuse to)."""
    pyenv = sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.1[2-9]*/bin/python3")))
    for candidate in (
        os.environ.get("PY312"),
        *pyenv,
        shutil.which("python3.12"),
        shutil.which("python3.13"),
    ):
        if not candidate or not Path(candidate).exists():
            continue
        check = [candidate, "-c", "import sys; print(sys.version_info >= (3, 12))"]
        probe = subprocess.run(check, capture_output=True, text=True, check=False)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return None


def install(name: str, log: Path, track: str = "newest") -> Path:
    """Install `name` at its `track`'s version unless it is in the cache; returns its executable."""
    exe, where, wanted = executable(name, track), folder(name, track), specs(name, track)
    # written last, with the versions: an install cut short is done again
    done = CACHE / f".installed-{where.name}"
    if exe.exists() and done.exists() and done.read_text() == " ".join(wanted):
        return exe
    CACHE.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        if PINS[name].registry == "npm":
            if shutil.which("npm") is None:
                raise Unavailable("npm is not installed")
            home = CACHE / ".install-home"
            env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                   "XDG_DATA_HOME": str(home / ".local/share"), "XDG_CACHE_HOME": str(home / ".cache"),
                   "XDG_STATE_HOME": str(home / ".local/state"), "npm_config_cache": str(CACHE / "npm-cache")}  # fmt: skip
            command = [
                "npm",
                "install",
                "--prefix",
                str(where),
                "--no-audit",
                "--no-fund",
                *wanted,
            ]
            _run(command, env, out)
        else:
            python = python312() if name == "openhands" else sys.executable
            if python is None:
                raise Unavailable(
                    "OpenHands needs Python 3.12 or newer, and none was found (set PY312)"
                )
            _run([python, "-m", "venv", "--clear", str(where)], dict(os.environ), out)
            _run([str(where / "bin/pip"), "install", "-q", *wanted], dict(os.environ), out)
    if not exe.exists():
        raise RuntimeError(f"installing {name} did not produce {exe}; see {log}")
    done.write_text(" ".join(wanted))
    return exe


def _run(command: list[str], env: dict[str, str], out: object) -> None:
    result = subprocess.run(
        command,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        timeout=900,
    )  # type: ignore[call-overload]
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed with exit code {result.returncode}")
