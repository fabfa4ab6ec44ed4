"""The trajectories a proxy can serve: --trajectory files, --trajectory-dir, and admin scripts.

Files are loaded once, before the server binds, so a bad file stops start-up with its reason.
A trajectory bound to many sessions is held once.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from proxy.errors import LoadError
from proxy.formats import load_all, load_bytes, load_file, trajectory_name
from proxy.names import file_in, is_valid_name
from proxy.replay.trajectory import Trajectory

SUFFIXES = (".json", ".jsonl", ".traj")
_ADMIN_CACHE = 256


class LibraryError(Exception):
    def __init__(self, errors: list[LoadError | str]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


class Library:
    def __init__(
        self,
        files: Sequence[Trajectory] = (),
        folder: Path | None = None,
        in_folder: Sequence[Trajectory] = (),
    ) -> None:
        self.files = tuple(files)  # in command-line order: the unclaimed candidates
        self.folder = folder
        self._by_name: dict[str, Trajectory] = {t.name: t for t in (*files, *in_folder)}
        self._by_task: dict[str, list[Trajectory]] = {}
        for t in (*files, *in_folder):
            if t.task is not None:
                self._by_task.setdefault(t.task.strip(), []).append(t)
        self._admin: OrderedDict[str, Trajectory] = OrderedDict()

    @classmethod
    def load(cls, files: Sequence[Path], folder: Path | None) -> Library:
        """Load everything, collecting every error before giving up."""
        errors: list[LoadError | str] = []
        loaded: list[Trajectory] = []
        in_folder: list[Trajectory] = []
        if folder is not None and not folder.is_dir():
            errors.append(f"--trajectory-dir {folder}: not a directory")
        paths = [(p, loaded) for p in files]
        if folder is not None and folder.is_dir():
            for p in sorted(folder.iterdir()):
                # files, and event stores (a folder with events/: an OpenHands conversation)
                if (p.suffix in SUFFIXES and p.is_file()) or (p / "events").is_dir():
                    if is_valid_name(trajectory_name(p)):
                        paths.append((p, in_folder))
                    else:
                        errors.append(f"{p}: the name may hold only letters, digits and . _ : -")
        names: dict[str, Path] = {}
        for path, into in paths:
            try:
                found = load_all(path)  # a file of rollouts holds several, named NAME.LINE
            except LoadError as exc:
                errors.append(exc)
                continue
            for trajectory in found:
                if trajectory.name in names:
                    errors.append(
                        f"{path}: a trajectory named {trajectory.name!r} is also in "
                        f"{names[trajectory.name]}"
                    )
                    continue
                names[trajectory.name] = path
                into.append(trajectory)
        if errors:
            raise LibraryError(errors)
        return cls(loaded, folder, in_folder)

    def __len__(self) -> int:
        return len(self._by_name)

    def all(self) -> list[Trajectory]:
        return list(self._by_name.values())

    def named(self, name: str) -> Trajectory | None:
        return self._by_name.get(name)

    async def find(self, name: str) -> Trajectory | None:
        """By name, including a file put into --trajectory-dir after start-up."""
        found = self._by_name.get(name)
        if found is not None or self.folder is None or not is_valid_name(name):
            return found
        for suffix in SUFFIXES:
            path = file_in(self.folder, name, suffix)
            if path.is_file():
                trajectory = await asyncio.to_thread(load_file, path)
                self._by_name.setdefault(name, trajectory)
                return self._by_name[name]
        return None

    def with_task(self, task: str | None) -> list[Trajectory]:
        return self._by_task.get(task.strip(), []) if task is not None else []

    def admin(self, data: bytes, session: str) -> Trajectory:
        """Parse an admin script and keep it by content digest (see `cached`)."""
        trajectory = load_bytes(data, name=f"admin:{session}", source=f"admin:{session}")
        self._admin[trajectory.digest] = trajectory
        if len(self._admin) > _ADMIN_CACHE:
            self._admin.popitem(last=False)
        return trajectory

    def cached(self, digest: str) -> Trajectory | None:
        """An admin script parsed before, so a request need not fetch and parse it again."""
        found = self._admin.get(digest)
        if found is not None:
            self._admin.move_to_end(digest)
        return found
