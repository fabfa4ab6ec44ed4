"""The pairs of real harness recordings in tests/fixtures/recordings (see its README)."""

from __future__ import annotations

import gzip
from pathlib import Path

from proxy.formats import load_file
from proxy.replay.trajectory import Trajectory

FOLDER = Path(__file__).parent.parent / "fixtures" / "recordings"
HARNESSES = ("claude", "opencode", "mini", "agents-run", "codex", "gemini", "openhands")


def recording(name: str, run: str, folder: Path) -> Path:
    """The recording of `name`'s run `run` ("a" or "b"), unpacked into `folder`."""
    path = folder / f"{name}-{run}.jsonl"
    path.write_bytes(gzip.decompress((FOLDER / f"{name}-{run}.jsonl.gz").read_bytes()))
    return path


def pair(name: str, folder: Path) -> tuple[Trajectory, Trajectory]:
    return load_file(recording(name, "a", folder)), load_file(recording(name, "b", folder))
