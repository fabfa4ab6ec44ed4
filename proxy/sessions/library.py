"""The trajectories a proxy can serve: --trajectory files, --trajectory-dir, and admin scripts.

Files are loaded once, before the server binds, so a bad file stops start-up with its reason;
they stay loaded. A trajectory bound to many sessions is held once.

What comes later (a file put into --trajectory-dir and named by x-replay-trajectory, a script PUT
through the admin API) is parsed in a thread, once however many requests ask for it at the same
time, and kept in a cache bounded by bytes (proxy.sessions.cache). A file of several rollouts is
named as at start-up, `NAME.LINE`: asking for one parses the file once and keeps all of them, as
one entry of the file's size. A file that fails to load is refused with its reason until it
changes; a link that leads out of the folder is never followed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from proxy.apis import BY_NAME, Api
from proxy.errors import LoadError, TrajectoryUnusable
from proxy.formats import load_all, load_bytes, trajectory_name
from proxy.names import inside, is_valid_name
from proxy.replay.trajectory import Trajectory, parent_of
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
        apis: Mapping[str, Api] = BY_NAME,
    ) -> None:
        self.files = tuple(files)  # in command-line order: the unclaimed candidates
        self.apis = apis  # the APIs a recording's exchanges may be in, by name
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
        cls,
        files: Sequence[Path],
        folder: Path | None,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        apis: Mapping[str, Api] = BY_NAME,
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
                found = load_all(path, apis=apis)  # a file of rollouts: several, named NAME.LINE
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
        return cls(loaded, folder, in_folder, cache_bytes=cache_bytes, apis=apis)

    def __len__(self) -> int:
        return len(self._by_name)

    def all(self) -> list[Trajectory]:
        """Every trajectory loaded: at start-up, and those kept since."""
        kept = self.cache.files()  # not admin scripts: those are their sessions' own
        return [*self._by_name.values(), *(t for t in kept if t.name not in self._by_name)]

    def named(self, name: str) -> Trajectory | None:
        return self._by_name.get(name)

    async def find(self, name: str) -> Trajectory | None:
        """By name, including a file put into --trajectory-dir after start-up: NAME.json (or
        .jsonl, .traj), else rollout LINE of a file of several, NAME.jsonl for NAME.LINE."""
        found = self._by_name.get(name)
        if found is None and (child := parent_of(name)) is not None:  # a run's subagent
            parent = await self.find(child[0])
            spawned = parent.child(child[1]) if parent is not None else None
            return spawned.trajectory if spawned is not None else None
        if found is not None or self.folder is None or not is_valid_name(name):
            return found
        stem, _, label = name.rpartition(".")
        for file_stem in [name, stem] if stem and label.isdigit() else [name]:
            held = self.cache.get_all(("file", file_stem))
            if held is None:
                path = self._late_path(file_stem)
                if path is None:
                    continue
                load = partial(self._load_late, path, file_stem)
                held = await self._once(("file", file_stem), load)
            found = _chosen(held, name, file_stem)
            if found is not None:
                return found
        return None

    def _late_path(self, stem: str) -> Path | None:
        assert self.folder is not None
        for suffix in SUFFIXES:
            path = self.folder / f"{stem}{suffix}"
            if path.is_file() or path.is_symlink():
                return path
        return None

    async def _load_late(self, path: Path, stem: str) -> tuple[Trajectory, ...]:
        held, size = await asyncio.to_thread(self._read_late, path, stem)
        self.cache.put(("file", stem), held, size)
        turns = sum(len(t.turns) for t in held)
        log.info(
            "loaded %s: %d turns in %d trajectories from %d bytes", path, turns, len(held), size
        )
        return held

    def _read_late(self, path: Path, name: str) -> tuple[tuple[Trajectory, ...], int]:
        """In a thread: the file's trajectories and size, unless it failed before as it is now."""
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
            held = tuple(load_all(path, apis=self.apis))  # a file of rollouts: all, in one parse
        except LoadError as exc:
            reason = f"x-replay-trajectory: trajectory {name!r} cannot be loaded: {exc}"
            self._failed[path] = (version, reason)
            log.warning("%s (refused until the file changes)", reason)
            raise TrajectoryUnusable(reason) from None
        self._failed.pop(path, None)
        return held, stat.st_size

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
        trajectory = await asyncio.to_thread(
            load_bytes, data, name=name, filename=name, apis=self.apis
        )
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


def _chosen(held: tuple[Trajectory, ...], name: str, stem: str) -> Trajectory | None:
    """The trajectory `name` of what file `stem` held (a file of one: its one)."""
    if name == stem and len(held) == 1:
        return held[0]
    found = next((t for t in held if t.name == name), None)
    if found is None and name == stem:  # the file of several itself: which rollout is not said
        names = ", ".join(t.name for t in held[:3])
        raise TrajectoryUnusable(
            f"x-replay-trajectory: {name!r} is a file of {len(held)} trajectories ({names}, ...), "
            f"one per rollout, each named by its line: name one of them, {held[0].name} for the "
            "first"
        )
    return found


_LINK_OUT = (
    "a symbolic link that leads out of the folder: links are followed only within "
    "--trajectory-dir, so that no file outside it is served by name; copy the file in"
)
