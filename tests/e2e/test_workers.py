"""Exactly-once turns under concurrency, across workers and replicas, and across a kill -9."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.load import (
    all_turns,
    call_id,
    expected,
    kill,
    metric,
    proxy_process,
    replay,
    session_name,
    write_trajectories,
)
from tests.helpers.servers import all_sessions

SESSIONS = 200
TURNS = 20


def statuses(url: str) -> dict[str, dict[str, Any]]:
    return {s["session"]: s for s in all_sessions(url)}


def check_everything(
    got: dict[int, list[tuple[str, str]]], status: dict[str, dict[str, Any]]
) -> None:
    for i in range(SESSIONS):
        assert got[i] == expected(i, range(TURNS), TURNS), f"session {i}"
        s = status[session_name(i)]
        assert s["turns_served"] == TURNS and s["phase"] == "served"
        assert s["script"]["name"] == f"traj-{i:04d}" and s["script"]["bound_by"] == "task"
        # every turn once, plus the twin of every fifth turn: never a turn too many or too few
        assert s["scripted_responses"] == TURNS + TURNS // 5


def test_200_sessions_x_20_turns_through_2_workers_on_sqlite(tmp_path: Path) -> None:
    write_trajectories(tmp_path / "trajs", SESSIONS, TURNS)
    args = [
        "--workers",
        "2",
        "--store",
        f"sqlite:///{tmp_path}/state.db",
        "--trajectory-dir",
        str(tmp_path / "trajs"),
    ]
    with proxy_process(*args) as (url, _):
        got = asyncio.run(replay([url], range(SESSIONS), TURNS))
        check_everything(got, statuses(url))
        metrics = httpx.get(url.removesuffix("/v1") + "/metrics").text
    # whichever worker answers the scrape reports what both served
    scripted = {"api": "chat", "lane": "main", "source": "scripted", "status": "200"}
    assert metric(metrics, "replay_proxy_requests_total", **scripted) == SESSIONS * (
        TURNS + TURNS // 5
    )


def test_200_sessions_x_20_turns_through_2_replicas_on_one_redis(
    tmp_path: Path, redis_url: str
) -> None:
    write_trajectories(tmp_path / "trajs", SESSIONS, TURNS)
    args = ["--store", redis_url, "--trajectory-dir", str(tmp_path / "trajs")]
    with proxy_process(*args) as (a, _), proxy_process(*args) as (b, _):
        got = asyncio.run(replay([a, b], range(SESSIONS), TURNS))  # each turn alternates replicas
        check_everything(got, statuses(a))
        assert statuses(b) == statuses(a)  # any replica reports any session


@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_kill_9_in_the_middle_then_every_session_continues_at_the_right_turn(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    sessions, turns = 40, TURNS
    url_of_store = (
        f"sqlite:///{tmp_path}/state.db"
        if store == "sqlite"
        else request.getfixturevalue("redis_url")
    )
    write_trajectories(tmp_path / "trajs", sessions, turns)
    args = ["--store", url_of_store, "--trajectory-dir", str(tmp_path / "trajs")]
    histories: dict[int, list[Any]] = {}

    with proxy_process(*args) as (url, process):
        asyncio.run(replay([url], range(sessions), 10, histories=histories))
        answered = 0

        def count() -> None:
            nonlocal answered
            answered += 1
            if answered == 100:  # mid-replay: well after the second half started, before it ends
                kill(process, signal.SIGKILL)

        asyncio.run(
            replay(
                [url],
                range(sessions),
                turns,
                histories=histories,
                on_answer=count,
                stop_on_transport_error=True,
            )
        )
    done_before = {i: len(all_turns(histories[i])) for i in range(sessions)}
    assert (
        max(done_before.values()) > 10 and min(done_before.values()) < turns
    )  # it really was mid-way

    with proxy_process(*args) as (url, _):
        before = statuses(url)
        for i in range(sessions):  # the status survived the kill
            s = before[session_name(i)]
            assert s["script"]["name"] == f"traj-{i:04d}"
            assert (
                done_before[i] <= s["turns_served"] <= done_before[i] + 1
            )  # +1: answered, then killed
        asyncio.run(replay([url], range(sessions), turns, histories=histories))
        after = statuses(url)
    for i in range(sessions):
        assert all_turns(histories[i]) == [call_id(i, k) for k in range(turns)], f"session {i}"
        assert after[session_name(i)]["turns_served"] == turns
