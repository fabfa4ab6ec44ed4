"""Session ids and trajectory names become file names, so they are checked before any use."""

from __future__ import annotations

import re
from pathlib import Path

_NAME = re.compile(r"[A-Za-z0-9._:-]{1,200}")


def is_valid_name(name: str) -> bool:
    """Letters, digits and . _ : - only; never "." or ".." (they would name a folder)."""
    return bool(_NAME.fullmatch(name)) and name not in (".", "..")


def inside(folder: Path | None, path: Path) -> bool:
    """`path` is in `folder` once links are followed (a link within the folder is fine)."""
    if folder is None:
        return False
    try:
        path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError):
        return False
    return True


def file_in(folder: Path, name: str, suffix: str) -> Path:
    """folder/name+suffix, for a name already checked; never outside `folder`."""
    if not is_valid_name(name):
        raise ValueError(f"invalid name {name!r}")
    path = folder / f"{name}{suffix}"
    if path.resolve().parent != folder.resolve():
        raise ValueError(f"{name!r} escapes {folder}")
    return path
