"""Installing the harnesses into a cache folder that outlives a test run.

The cache is $REPLAY_PROXY_HARNESS_CACHE, else ~/.cache/replay-proxy/harnesses. npm installs run
with a throw-away HOME: opencode's postinstall runs the binary, which writes config into HOME.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

CACHE = Path(
    os.environ.get("REPLAY_PROXY_HARNESS_CACHE", Path.home() / ".cache/replay-proxy/harnesses")
)

VERSIONS = {
    "opencode": ["opencode-ai@1.18.33"],
    "codex": ["@openai/codex@0.171.0"],
    "claude": ["@anthropic-ai/claude-code@2.1.197"],
    "gemini": ["@google/gemini-cli@0.61.0"],
    "mini": ["mini-swe-agent==2.4.6"],
    "agents": ["openai-agents==0.24.0"],
    "openhands": ["openhands-sdk==1.58.2", "openhands-tools==1.58.2"],
}


class Unavailable(Exception):
    """The harness cannot be installed on this machine (no npm, no Python 3.12, no registry)."""


def executable(name: str) -> Path:
    return {
        "opencode": CACHE / "opencode/node_modules/.bin/opencode",
        "codex": CACHE / "codex/node_modules/.bin/codex",
        "claude": CACHE / "claude/node_modules/.bin/claude",
        "gemini": CACHE / "gemini/node_modules/.bin/gemini",
        "mini": CACHE / "venv-mini/bin/mini",
        "agents": CACHE / "venv-agents/bin/python",
        "openhands": CACHE / "venv-openhands/bin/python",
    }[name]


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


def install(name: str, log: Path) -> Path:
    """Install `name` unless it is in the cache; returns its executable."""
    exe = executable(name)
    # written last, with the versions: an install cut short, or of other versions, is done again
    done = CACHE / f".installed-{name}"
    if exe.exists() and done.exists() and done.read_text() == " ".join(VERSIONS[name]):
        return exe
    CACHE.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        if name in ("opencode", "codex", "claude", "gemini"):
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
                str(CACHE / name),
                "--no-audit",
                "--no-fund",
                *VERSIONS[name],
            ]
            _run(command, env, out)
        else:
            python = python312() if name == "openhands" else sys.executable
            if python is None:
                raise Unavailable(
                    "OpenHands needs Python 3.12 or newer, and none was found (set PY312)"
                )
            venv = CACHE / f"venv-{name}"
            _run([python, "-m", "venv", "--clear", str(venv)], dict(os.environ), out)
            _run([str(venv / "bin/pip"), "install", "-q", *VERSIONS[name]], dict(os.environ), out)
    if not exe.exists():
        raise RuntimeError(f"installing {name} did not produce {exe}; see {log}")
    done.write_text(" ".join(VERSIONS[name]))
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
