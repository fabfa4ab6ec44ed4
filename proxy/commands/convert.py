"""`replay-proxy convert FILE... -o OUT`: trajectories (any format) written as chat JSON, or as
NeMo-Gym rollout lines."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from proxy.errors import LoadError
from proxy.exits import EXIT_BAD_FILE, EXIT_USAGE
from proxy.formats import load_all
from proxy.formats.convert import report, write
from proxy.formats.rollout import line
from proxy.replay.trajectory import Trajectory


def convert(files: Sequence[Path], out: Path, to: str = "chat") -> int:
    loaded: list[Trajectory] = []
    failed = False
    for path in files:
        try:
            loaded += load_all(path)
        except LoadError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
    if to == "nemo-gym" and out.suffix == ".jsonl" and not out.is_dir():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"".join(line(t) for t in loaded))
        for t in loaded:
            print("\n".join(report(t, out)))
        return EXIT_BAD_FILE if failed else 0
    single = to == "chat" and out.suffix == ".json" and not out.is_dir()
    if single and len(loaded) > 1:
        print(
            f"replay-proxy: {out}: {len(loaded)} trajectories to write: give a folder",
            file=sys.stderr,
        )
        return EXIT_USAGE
    names: set[str] = set()
    for t in loaded:
        target = out if single else out / f"{t.name}.{'json' if to == 'chat' else 'jsonl'}"
        if t.name in names:
            print(f"replay-proxy: two trajectories are named {t.name!r}", file=sys.stderr)
            return EXIT_USAGE
        names.add(t.name)
        if to == "chat":
            write(t, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(line(t))
        print("\n".join(report(t, target)))
    return EXIT_BAD_FILE if failed else 0
