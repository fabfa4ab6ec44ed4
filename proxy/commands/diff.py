"""`replay-proxy diff A B` and `replay-proxy masks suggest A B`: two trajectories or recordings
compared step by step, and the masks that would make them agree."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from proxy.config import read_mask_file
from proxy.errors import LoadError
from proxy.exits import EXIT_BAD_FILE
from proxy.formats import load_file
from proxy.recording.diff import diff
from proxy.recording.suggest import mask_file
from proxy.recording.suggest import suggest as suggested
from proxy.replay.trajectory import Trajectory
from proxy.replay.volatile import mask_flags


def patterns(masks: Sequence[str], files: Sequence[Path]) -> list[re.Pattern[str]] | None:
    """--mask and --mask-file patterns, compiled; None (said on stderr) when one is bad."""
    try:
        texts = [*masks, *(p for path in files for p in read_mask_file(path))]
        return [re.compile(text) for text in texts]
    except (re.error, ValueError) as exc:
        print(f"replay-proxy: a mask: {exc}", file=sys.stderr)
        return None


def _both(a: Path, b: Path) -> tuple[Trajectory, Trajectory] | None:
    try:
        return load_file(a), load_file(b)
    except LoadError as exc:
        print(str(exc), file=sys.stderr)
        return None


def compare(
    a: Path,
    b: Path,
    masks: Sequence[re.Pattern[str]],
    *,
    presets: bool = True,
    fail_on: str = "any",
) -> int:
    both = _both(a, b)
    if both is None:
        return EXIT_BAD_FILE
    findings = diff(*both, masks, presets=presets)
    for finding in findings:
        print(finding.report(str(a), str(b)))
    if not findings:
        print(f"{a} and {b} agree step for step")
    changed = [f for f in findings if not f.volatile]
    if findings and not changed:
        print(f"only volatile differences ({len(findings)}): values that change between runs")
    failed = changed if fail_on == "changed" else findings
    return EXIT_BAD_FILE if failed else 0


def suggest(
    a: Path, b: Path, masks: Sequence[re.Pattern[str]], *, presets: bool, out: Path | None
) -> int:
    both = _both(a, b)
    if both is None:
        return EXIT_BAD_FILE
    found = suggested(*both, masks, presets=presets)
    preset = f" on top of the {found.preset.name} preset" if found.preset else ""
    if not found.masks and not found.beyond:
        print(f"{a} and {b} agree step for step{preset}: no mask is needed")
        return 0
    if found.masks:
        print(f"A: {a}\nB: {b}\n{len(found.masks)} masks{preset} explain the differences:")
        for suggestion in found.masks:
            print(f"\n  {mask_flags([suggestion.pattern])}")
            for line in suggestion.comment():
                print(f"      {line}")
        print(f"\nflags: {mask_flags(s.pattern for s in found.masks)}")
        if out is not None:
            out.write_text(mask_file(found, str(a), str(b)), encoding="utf-8")
            print(f"written to {out} (give it to --mask-file)")
    if found.beyond:
        print(
            f"\n{len(found.beyond)} differences no mask can explain (another run, not a volatile value):"
        )
        for place in found.beyond[:20]:
            print(f"  {place}")
        if len(found.beyond) > 20:
            print(f"  ... and {len(found.beyond) - 20} more")
        return EXIT_BAD_FILE
    return 0
