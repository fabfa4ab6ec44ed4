"""The trajectories a proxy can serve: --trajectory files, --trajectory-dir, and admin scripts.

Files are loaded once, before the server binds, so a bad file stops start-up with its reason;
they stay loaded. A trajectory bound to many sessions is held once.

What comes later (a file put into --trajectory-dir and named by x-replay-trajectory, a script PUT
through the admin API) is parsed in a thread, once however many requests ask for it at the same
time, and kept in a cache bounded by bytes (proxy.sessions.cache). A file that fails to load is
refused with its reason until it changes; a link that leads out of the folder is never followed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from proxy.errors import LoadError, TrajectoryUnusable
from proxy.formats import load_all, load_bytes, load_file, trajectory_name
from proxy.names import inside, is_valid_name
from proxy.replay.trajectory import Trajectory
from proxy.sessions.cache import TrajectoryCache

log = logging.getLogger("proxy.library")
T = TypeVar("T")
SUFFIXES = (".json", ".jsonl", ".traj")
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024


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
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.files = tuple(files)  # in command-line order: the unclaimed candidates
        self.folder = folder
        self._by_name: dict[str, Trajectory] = {t.name: t for t in (*files, *in_folder)}
        self._by_task: dict[str, list[Trajectory]] = {}
        for t in (*files, *in_folder):
            if t.task is not None:
                self._by_task.setdefault(t.task.strip(), []).append(t)
        self.cache = TrajectoryCache(cache_bytes)  # what came after start-up
        self._loading: dict[Hashable, asyncio.Future[Any]] = {}
        self._failed: dict[Path, tuple[tuple[int, int], str]] = {}  # path -> (stat, reason)

    @classmethod
    def load(
        cls, files: Sequence[Path], folder: Path | None, *, cache_bytes: int = DEFAULT_CACHE_BYTES
    ) -> Library:
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
                    if not inside(folder, p):
                        errors.append(f"{p}: {_LINK_OUT}")
                    elif is_valid_name(trajectory_name(p)):
                        paths.append((p, in_folder))
                    else:
                        errors.append(f"{p}: the name may hold only letters, digits and . _ : -")
        names: dict[str, Path] = {}
        for path, into in paths:
            if into is loaded and path.is_dir() and not (path / "events").is_dir():
                errors.append(
                    f"--trajectory {path}: a folder, where one file is expected (or an OpenHands "
                    f"conversation folder): serve every trajectory in it with --trajectory-dir {path}"
                )
                continue
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
        return cls(loaded, folder, in_folder, cache_bytes=cache_bytes)

    def __len__(self) -> int:
        return len(self._by_name)

    def all(self) -> list[Trajectory]:
        """Every trajectory loaded: at start-up, and those kept since."""
        kept = self.cache.files()  # not admin scripts: those are their sessions' own
        return [*self._by_name.values(), *(t for t in kept if t.name not in self._by_name)]

    def named(self, name: str) -> Trajectory | None:
        return self._by_name.get(name)

    async def find(self, name: str) -> Trajectory | None:
        """By name, including a file put into --trajectory-dir after start-up."""
        found = self._by_name.get(name)
        if found is not None or self.folder is None or not is_valid_name(name):
            return found
        found = self.cache.get(("file", name))
        if found is not None:
            return found
        for suffix in SUFFIXES:
            path = self.folder / f"{name}{suffix}"
            if path.is_file() or path.is_symlink():
                return await self._once(("file", name), partial(self._load_late, path, name))
        return None

    async def _load_late(self, path: Path, name: str) -> Trajectory:
        trajectory, size = await asyncio.to_thread(self._read_late, path, name)
        self.cache.put(("file", name), trajectory, size)
        log.info("loaded %s: %d turns from %d bytes", path, len(trajectory.turns), size)
        return trajectory

    def _read_late(self, path: Path, name: str) -> tuple[Trajectory, int]:
        """In a thread: the file's trajectory and size, unless it failed before as it is now."""
        if not inside(self.folder, path):
            raise TrajectoryUnusable(f"x-replay-trajectory: {path}: {_LINK_OUT}")
        try:
            stat = path.stat()
        except OSError as exc:
            raise TrajectoryUnusable(f"x-replay-trajectory: {path}: cannot read: {exc}") from None
        version = (stat.st_mtime_ns, stat.st_size)
        failed = self._failed.get(path)
        if failed is not None and failed[0] == version:
            raise TrajectoryUnusable(failed[1])  # the same file failed before: not parsed again
        try:
            trajectory = load_file(path)
        except LoadError as exc:
            reason = f"x-replay-trajectory: trajectory {name!r} cannot be loaded: {exc}"
            self._failed[path] = (version, reason)
            log.warning("%s (refused until the file changes)", reason)
            raise TrajectoryUnusable(reason) from None
        self._failed.pop(path, None)
        return trajectory, stat.st_size

    async def _once(self, key: Hashable, load: Callable[[], Awaitable[T]]) -> T:
        """One load per key in flight: concurrent requests for it wait for the same one."""
        pending = self._loading.get(key)
        if pending is None:
            pending = asyncio.ensure_future(load())
            self._loading[key] = pending
            pending.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(pending)  # a caller that leaves does not cancel the others

    def with_task(self, task: str | None) -> list[Trajectory]:
        return self._by_task.get(task.strip(), []) if task is not None else []

    async def admin(self, data: bytes, session: str) -> Trajectory:
        """Parse an admin script (in a thread) and keep it by content digest."""
        name = f"admin:{session}"
        trajectory = await asyncio.to_thread(load_bytes, data, name=name, source=name)
        self.cache.put(("admin", trajectory.digest), trajectory, len(data))
        return trajectory

    async def admin_script(
        self, digest: str, session: str, fetch: Callable[[], Awaitable[bytes | None]]
    ) -> Trajectory | None:
        """A session's admin script: kept, else fetched (from the store) and parsed again, once
        for all the requests that ask at the same time."""
        found = self.cache.get(("admin", digest))
        if found is not None:
            return found

        async def load() -> Trajectory | None:
            data = await fetch()
            return await self.admin(data, session) if data is not None else None

        return await self._once(("admin", digest), load)


_LINK_OUT = (
    "a symbolic link that leads out of the folder: links are followed only within "
    "--trajectory-dir, so that no file outside it is served by name; copy the file in"
)
