"""Trajectories that come after start-up (a file named by x-replay-trajectory, an admin script):
loaded once however many ask, a bad file refused with its reason until it changes, links out of
the folder never followed, the parsed copies bounded by bytes, and a file of several rollouts
reached by each rollout's name."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.sessions.library import Library, LibraryError
from tests.conftest import ROOT, ProxyFactory
from tests.wire.sessions.test_admin_and_binding import TOOLS, admin, ask, first_call_id, recording

# five NeMo-Gym rollouts, one per line (tests/fixtures/harness_logs/nemo-gym/README.md)
ROLLOUTS = ROOT / "tests/fixtures/harness_logs/nemo-gym/xlam_fc.jsonl"


def rollout_request(line: int) -> tuple[dict[str, Any], str]:
    """What the harness of rollout `line` sends first, and the call id it recorded, from the raw
    file."""
    row = json.loads(ROLLOUTS.read_text().splitlines()[line - 1])
    params = row["responses_create_params"]
    messages = [{"role": m["role"], "content": m["content"]} for m in params["input"]]
    tools = [
        {"type": "function", "function": {"name": t["name"], "parameters": t["parameters"]}}
        for t in params["tools"]
    ]
    output = row["response"]["output"]
    call = next(o["call_id"] for o in output if o.get("type") == "function_call")
    return {"model": "m", "messages": messages, "tools": tools}, call


def big_recording(task: str, turns: int, pad: int) -> list[dict[str, object]]:
    """A recording of `turns` tool calls whose outputs carry `pad` bytes each."""
    messages = recording(task, *(f"c{i}" for i in range(turns)))
    for message in messages:
        if message["role"] == "tool":
            message["content"] = "x" * pad
    return messages


def loads(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "proxy.library" and text in r.getMessage()
    ]


def test_concurrent_first_requests_for_a_new_file_load_it_once(
    proxy: ProxyFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.library")
    folder = tmp_path / "dir"
    folder.mkdir()
    with proxy(trajectory_dir=folder) as url:
        # put in the folder after start-up: loaded when first named (about 35 MB)
        (folder / "big.json").write_text(json.dumps(big_recording("t", 40, 900_000)))
        start = threading.Barrier(8)
        answers: list[httpx.Response] = []

        def first(n: int) -> None:
            start.wait()
            answers.append(ask(url, f"s{n}", "t", **{"x-replay-trajectory": "big"}))

        threads = [threading.Thread(target=first, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        health = httpx.get(url.removesuffix("/v1") + "/healthz").json()
    assert [first_call_id(a) for a in answers] == ["c0"] * 8
    assert len(loads(caplog, "loaded")) == 1  # one parse for eight sessions
    assert health["trajectory_cache"]["entries"] == 1


def test_a_file_that_fails_to_load_is_refused_with_its_reason_until_it_changes(
    proxy: ProxyFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.library")
    folder = tmp_path / "dir"
    folder.mkdir()
    with proxy(trajectory_dir=folder) as url:
        broken = folder / "broken.json"
        broken.write_text(
            '[{"role": "user", "content": "t"}, {"role": "assistant", "tool_calls": 3}]'
        )
        refused = [ask(url, f"s{n}", "t", **{"x-replay-trajectory": "broken"}) for n in range(3)]
        broken.write_text(json.dumps(recording("t", "fixed1")))  # mended: loaded at once
        mended = ask(url, "s9", "t", **{"x-replay-trajectory": "broken"})
    for answer in refused:
        assert answer.status_code == 404, answer.text
        error = answer.json()["error"]
        assert error["code"] == "trajectory_unusable"
        assert "broken" in error["message"] and "tool_calls" in error["message"]
        assert "Traceback" not in answer.text
    assert len(loads(caplog, "cannot be loaded")) == 1  # parsed once, not on every request
    assert first_call_id(mended) == "fixed1"


def test_links_are_followed_only_within_the_folder(proxy: ProxyFactory, tmp_path: Path) -> None:
    folder = tmp_path / "dir"
    folder.mkdir()
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps(recording("t", "outside1")))
    (folder / "real.json").write_text(json.dumps(recording("t", "real1")))
    with proxy(trajectory_dir=folder) as url:
        (folder / "escape.json").symlink_to(outside)
        (folder / "alias.json").symlink_to(folder / "real.json")
        escape = ask(url, "s1", "t", **{"x-replay-trajectory": "escape"})
        alias = ask(url, "s2", "t", **{"x-replay-trajectory": "alias"})
    assert escape.status_code == 404, escape.text
    assert "symbolic link that leads out of the folder" in escape.json()["error"]["message"]
    assert "outside1" not in escape.text
    assert first_call_id(alias) == "real1"
    with pytest.raises(LibraryError) as caught:  # at start-up too
        Library.load((), folder)
    assert [str(e) for e in caught.value.errors] == [
        f"{folder / 'escape.json'}: a symbolic link that leads out of the folder: links are "
        "followed only within --trajectory-dir, so that no file outside it is served by name; "
        "copy the file in"
    ]


def test_admin_scripts_are_kept_within_the_cache_bound_and_parsed_again_when_needed(
    proxy: ProxyFactory,
) -> None:
    scripts = {f"job-{n}": json.dumps(big_recording(f"task {n}", 3, 200_000)) for n in range(5)}
    size = len(next(iter(scripts.values())))
    with proxy(trajectory_cache_bytes=int(size * 2.5)) as url:
        for session, script in scripts.items():
            assert httpx.put(admin(url) + f"/{session}", content=script).status_code == 200
        health = httpx.get(url.removesuffix("/v1") + "/healthz").json()["trajectory_cache"]
        # the first script was evicted: its session gets it back from the store
        again = ask(url, "job-0", "task 0")
    assert health["entries"] == 2 and health["bytes"] <= health["limit"]
    assert health["evicted"] == 3
    assert first_call_id(again) == "c0"


def test_a_file_rewritten_after_it_was_let_go_is_not_served_to_its_session(
    proxy: ProxyFactory, tmp_path: Path
) -> None:
    folder = tmp_path / "dir"
    folder.mkdir()
    with proxy(trajectory_dir=folder, trajectory_cache_bytes=1) as url:
        (folder / "a.json").write_text(json.dumps(recording("t", "a1", "a2")))
        (folder / "b.json").write_text(json.dumps(recording("t", "b1")))
        assert first_call_id(ask(url, "s1", "t", **{"x-replay-trajectory": "a"})) == "a1"
        assert first_call_id(ask(url, "s2", "t", **{"x-replay-trajectory": "b"})) == "b1"  # a goes
        (folder / "a.json").write_text(json.dumps(recording("t", "a1", "EVIL2")))
        messages = recording("t", "a1")  # s1 ran turn 1 and asks for turn 2
        refused = httpx.post(
            url + "/chat/completions",
            json={"model": "m", "messages": messages, "tools": TOOLS},
            headers={"x-session-affinity": "s1"},
        )
        listed = httpx.get(admin(url)).json()["data"]
    assert refused.status_code == 404, refused.text
    assert "has changed since the session bound it" in refused.json()["error"]["message"]
    assert "EVIL2" not in refused.text
    by_id = {s["session"]: s for s in listed}  # the list still answers, for every session
    assert "has changed" in by_id["s1"]["script"]["error"]
    assert by_id["s2"]["script"]["error"] is None


def test_strict_side_answers_never_come_from_other_sessions_admin_scripts() -> None:
    library = Library()
    admin_script = asyncio.run(library.admin(json.dumps(recording("t", "x1")).encode(), "other"))
    assert library.cache.get(("admin", admin_script.digest)) is admin_script
    assert library.all() == []  # only what was loaded by name


def test_a_file_of_rollouts_put_in_the_folder_later_is_reached_by_each_rollouts_name(
    proxy: ProxyFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.library")
    folder = tmp_path / "dir"
    folder.mkdir()
    third, third_call = rollout_request(3)
    second, second_call = rollout_request(2)
    with proxy(trajectory_dir=folder) as url:
        shutil.copy(ROLLOUTS, folder / "lc.jsonl")  # after start-up
        root = url.removesuffix("/v1")
        by_header = httpx.post(
            url + "/chat/completions",
            json=third,
            headers={"x-session-affinity": "s1", "x-replay-trajectory": "lc.3"},
        )
        by_path = httpx.post(f"{root}/s/s2/t/lc.2/v1/chat/completions", json=second)
        whole = httpx.post(f"{root}/s/s3/t/lc/v1/chat/completions", json=second)
        health = httpx.get(root + "/healthz").json()["trajectory_cache"]
    assert first_call_id(by_header) == third_call
    assert first_call_id(by_path) == second_call
    assert len(loads(caplog, "loaded")) == 1  # one parse for both names
    assert health["entries"] == 1 and health["bytes"] == ROLLOUTS.stat().st_size
    # the file's own name does not say which rollout: refused, naming them
    assert whole.status_code == 404, whole.text
    assert "'lc' is a file of 5 trajectories (lc.1, lc.2, lc.3, ...)" in whole.text
