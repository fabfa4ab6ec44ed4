"""The harness versions the tests run, pinned in this one place.

Each harness has two tracks: `newest`, the version every harness test runs on (the newest the
package index had when it was last moved), and `oldest`, the oldest version the docs support.
Where the two differ, CI also runs the main recipe test and the subagent test on `oldest`
(tests/e2e/test_harnesses.py); elsewhere oldest = newest. The "tested versions" column of
docs/harnesses/index.md is checked against these pins (tests/unit/test_harness_versions.py).

REPLAY_PROXY_HARNESS_VERSIONS overrides the newest track, as `name=version` pairs separated by
spaces or commas (`claude=2.1.340 codex=0.172.0`): `python -m tests.helpers.harness.newest` runs the
harness suite that way on whatever the registries have.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pin:
    registry: str  # npm | pypi
    packages: tuple[str, ...]  # installed together, at the same version
    oldest: str
    newest: str


PINS = {
    "opencode": Pin("npm", ("opencode-ai",), oldest="1.18.33", newest="1.18.33"),
    "codex": Pin("npm", ("@openai/codex",), oldest="0.171.0", newest="0.171.0"),
    "claude": Pin("npm", ("@anthropic-ai/claude-code",), oldest="2.1.197", newest="2.1.332"),
    "gemini": Pin("npm", ("@google/gemini-cli",), oldest="0.61.0", newest="0.61.0"),
    "mini": Pin("pypi", ("mini-swe-agent",), oldest="2.4.6", newest="2.4.6"),
    "agents": Pin("pypi", ("openai-agents",), oldest="0.24.0", newest="0.24.0"),
    "openhands": Pin(
        "pypi", ("openhands-sdk", "openhands-tools"), oldest="1.58.2", newest="1.58.2"
    ),
}
TRACKS = ("newest", "oldest")
OVERRIDE = "REPLAY_PROXY_HARNESS_VERSIONS"
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+-]*")


def overrides(text: str | None = None) -> dict[str, str]:
    """The newest-track versions REPLAY_PROXY_HARNESS_VERSIONS (or `text`) puts in place."""
    text = os.environ.get(OVERRIDE, "") if text is None else text
    found: dict[str, str] = {}
    for pair in re.split(r"[\s,]+", text.strip()):
        if not pair:
            continue
        name, _, version = pair.partition("=")
        if name not in PINS or not _VERSION.fullmatch(version):
            raise ValueError(f"{OVERRIDE}: {pair!r} is not one of {sorted(PINS)}=VERSION")
        found[name] = version
    return found


def version(name: str, track: str = "newest") -> str:
    if track not in TRACKS:
        raise ValueError(f"unknown track {track!r}: {TRACKS}")
    if track == "newest":
        return overrides().get(name, PINS[name].newest)
    return PINS[name].oldest


def specs(name: str, track: str = "newest") -> list[str]:
    """What npm install or pip install is given for this harness on this track."""
    pin, at = PINS[name], version(name, track)
    return [f"{p}@{at}" if pin.registry == "npm" else f"{p}=={at}" for p in pin.packages]


def differs(name: str) -> bool:
    """The oldest supported version is not the newest tested one: it has tests of its own."""
    return PINS[name].oldest != PINS[name].newest
