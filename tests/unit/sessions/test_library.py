"""The trajectories a proxy serves: every load error collected before start-up, names unique,
files found by task, late files loaded once and refused until they change, admin scripts fetched
once for concurrent requests."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from proxy.errors import TrajectoryUnusable
from proxy.sessions.cache import TrajectoryCache
from proxy.sessions.library import Library, LibraryError

GREETING = Path(__file__).parents[3] / "examples" / "greeting.json"
# five NeMo-Gym rollouts, one per line (tests/fixtures/harness_logs/nemo-gym/README.md)
ROLLOUTS = Path(__file__).parents[2] / "fixtures" / "harness_logs" / "nemo-gym" / "xlam_fc.jsonl"


def messages(task: str | None = None) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(GREETING.read_text())
    if task is not None:
        data[1] = {"role": "user", "content": task}
    return data


def write(folder: Path, name: str, data: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_files_and_a_folder_are_loaded_and_found_by_name_and_task(tmp_path: Path) -> None:
    one = write(tmp_path, "one.json", messages("  Fix the bug.\n"))
    folder = tmp_path / "more"
    write(folder, "two.json", messages("Write the docs."))
    write(folder, "notes.txt", "not a trajectory")
    library = Library.load([one], folder)
    assert len(library) == 2
    assert [t.name for t in library.files] == ["one"]  # only --trajectory files are unclaimed ones
    assert library.named("two") is not None and library.named("notes") is None
    assert [t.name for t in library.with_task("Fix the bug.")] == ["one"]
    assert library.with_task("nobody's task") == [] and library.with_task(None) == []


def test_every_error_is_collected_before_giving_up(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.json", "{ not json")
    folder = tmp_path / "dir"
    write(folder, "a.json", messages())
    with pytest.raises(LibraryError) as failed:
        Library.load([bad, folder, tmp_path / "missing.json"], tmp_path / "no-such-folder")
    errors = [str(e) for e in failed.value.errors]
    assert len(errors) == 4, errors
    assert any("no-such-folder: not a directory" in e for e in errors)
    assert any("a folder, where one file is expected" in e for e in errors)
    assert any("bad.json" in e for e in errors) and any("missing.json" in e for e in errors)


def test_two_trajectories_of_one_name_are_refused(tmp_path: Path) -> None:
    one = write(tmp_path / "a", "run.json", messages())
    two = write(tmp_path / "b", "run.json", messages("other"))
    with pytest.raises(LibraryError, match="a trajectory named 'run' is also in"):
        Library.load([one, two], None)


def test_a_folder_file_with_a_name_that_is_no_name_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "has space.json", messages())
    with pytest.raises(LibraryError, match=r"may hold only letters, digits and \. _ : -"):
        Library.load([], tmp_path)


def test_a_link_out_of_the_folder_is_refused_at_start(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", "secret.json", messages())
    folder = tmp_path / "served"
    folder.mkdir()
    (folder / "secret.json").symlink_to(outside)
    with pytest.raises(LibraryError, match="leads out of the folder"):
        Library.load([], folder)


async def test_a_file_put_into_the_folder_later_is_loaded_once_and_kept(tmp_path: Path) -> None:
    library = Library.load([], tmp_path)
    assert await library.find("late") is None
    write(tmp_path, "late.json", messages())
    first, second = await asyncio.gather(library.find("late"), library.find("late"))
    assert first is not None and first is second  # one load for both requests
    assert await library.find("late") is first  # from the cache now
    assert [t.name for t in library.all()] == ["late"]
    assert library.cache.report()["entries"] == 1


async def test_an_invalid_name_is_never_looked_up_in_the_folder(tmp_path: Path) -> None:
    write(tmp_path / "sub", "x.json", messages())
    library = Library.load([], tmp_path)
    assert await library.find("../sub/x") is None
    assert await library.find("..") is None


async def test_a_late_file_that_fails_is_refused_until_it_changes(tmp_path: Path) -> None:
    library = Library.load([], tmp_path)
    path = write(tmp_path, "broken.json", "[{")
    for _ in range(2):
        with pytest.raises(TrajectoryUnusable, match="'broken' cannot be loaded"):
            await library.find("broken")
    path.write_text(json.dumps(messages()))
    found = await library.find("broken")
    assert found is not None and len(found.turns) == 3


async def test_a_late_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside", "x.json", messages())
    folder = tmp_path / "served"
    folder.mkdir()
    library = Library.load([], folder)
    (folder / "x.json").symlink_to(outside)
    with pytest.raises(TrajectoryUnusable, match="leads out of the folder"):
        await library.find("x")


async def test_an_admin_script_is_kept_by_digest_and_fetched_once_when_let_go() -> None:
    library = Library()
    data = json.dumps(messages()).encode()
    script = await library.admin(data, "ses_1")
    assert script.name == "admin:ses_1"
    fetched: list[str] = []

    async def fetch() -> bytes | None:
        fetched.append("store")
        return data

    assert await library.admin_script(script.digest, "ses_1", fetch) is script
    assert fetched == []  # kept: the store is not asked
    library.cache = TrajectoryCache(library.cache.limit)  # let go, as a full cache would
    again = await asyncio.gather(
        *(library.admin_script(script.digest, "ses_1", fetch) for _ in range(3))
    )
    assert fetched == ["store"]
    assert again[0] is not None and all(a is again[0] for a in again)
    assert again[0].digest == script.digest
    assert library.all() == []  # admin scripts are their sessions' own, not listed


async def test_an_admin_script_gone_from_the_store_is_none() -> None:
    async def fetch() -> bytes | None:
        return None

    assert await Library().admin_script("0" * 64, "ses_1", fetch) is None


async def test_a_late_file_of_rollouts_is_found_by_each_rollouts_name_in_one_parse(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.library")
    library = Library.load([], tmp_path)
    shutil.copy(ROLLOUTS, tmp_path / "lc.jsonl")  # after start-up
    second, fifth = await asyncio.gather(library.find("lc.2"), library.find("lc.5"))
    third = await library.find("lc.3")
    assert second is not None and fifth is not None and third is not None
    assert (second.name, third.name, fifth.name) == ("lc.2", "lc.3", "lc.5")
    assert third.turns[0].tool_calls[0].id == "chatcmpl-tool-cd62ffcc3b58426bb5194edb59d4a752"
    parsed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("loaded")]
    assert len(parsed) == 1 and "in 5 trajectories" in parsed[0]  # one parse for every name
    # one cache entry of the file's size, listed as its five rollouts
    size = ROLLOUTS.stat().st_size
    assert library.cache.report() == {"entries": 1, "bytes": size, "limit": 256 << 20, "evicted": 0}
    assert [t.name for t in library.all()] == [f"lc.{k}" for k in range(1, 6)]
    # the same trajectories, by the same names, as a start-up load gives
    at_start = Library.load([], tmp_path).all()
    assert [(t.name, t.digest) for t in at_start] == [(t.name, t.digest) for t in library.all()]
    assert await library.find("lc.9") is None  # no such line
    with pytest.raises(TrajectoryUnusable, match=r"'lc' is a file of 5 trajectories \(lc.1, "):
        await library.find("lc")


async def test_a_file_named_like_a_rollout_is_found_before_the_rollout(tmp_path: Path) -> None:
    shutil.copy(ROLLOUTS, tmp_path / "lc.jsonl")
    library = Library([], tmp_path)
    write(tmp_path, "lc.2.json", messages("the file of its own"))
    found = await library.find("lc.2")
    assert found is not None and found.task == "the file of its own"
    assert (await library.find("lc.3")) is not None  # the rollout file is still read for the rest
