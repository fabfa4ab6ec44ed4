"""Sessions expire after --session-ttl in every store, are counted when they do, and the list of
sessions (admin API and status page) comes a page at a time."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.conftest import ProxyFactory
from tests.wire.sessions.test_admin_and_binding import admin, ask, first_call_id, recording


def until(condition: Callable[[], Any], what: str, deadline: float = 30.0) -> Any:
    """Poll `condition` until it holds (the sweeper runs on its own clock); fail after `deadline`."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        result = condition()
        if result:
            return result
        time.sleep(0.05)
    pytest.fail(f"{what} never happened within {deadline:g} s")


def expired_count(root: str) -> float:
    found = re.search(
        r"^replay_proxy_sessions_expired_total (\S+)$", httpx.get(root + "/metrics").text, re.M
    )
    assert found is not None
    return float(found[1])


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_an_idle_session_expires_and_its_trajectory_is_free_again(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path], tmp_path: Path, kind: str,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    store = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path}/state.db"}.get(kind)
    if store is None:
        store = request.getfixturevalue("redis_url")
    trajectory = write_trajectory(recording("the task", "only1"))
    with proxy(trajectory=[trajectory], store=store, session_ttl=1) as url:
        root = url.removesuffix("/v1")
        # an unclaimed trajectory goes to the first session that comes, and only to it
        assert first_call_id(ask(url, "first", "a task")) == "only1"
        assert ask(url, "second", "a task").json()["error"]["code"] == "no_upstream"
        assert httpx.get(admin(url) + "/first").status_code == 200
        until(lambda: expired_count(root) == 2, "expiry")  # both, counted once
        assert httpx.get(admin(url)).json()["data"] == []
        assert httpx.get(admin(url) + "/first").status_code == 404
        assert "replay_proxy_sessions 0.0" in httpx.get(root + "/metrics").text
        # the trajectory is free again: a new session takes it from the start
        assert first_call_id(ask(url, "third", "a task")) == "only1"
    if kind == "redis":
        client = redis.Redis.from_url(store)
        left = sorted(k.decode() for k in client.scan_iter("replay-proxy:*"))
        client.close()
        assert not [k for k in left if k.endswith((":first", ":second"))], left


def test_a_session_ttl_of_zero_keeps_sessions(proxy: ProxyFactory, redis_url: str) -> None:
    with proxy(store=redis_url, session_ttl=0) as url:
        ask(url, "kept", "t")
        sessions = httpx.get(admin(url)).json()["data"]
    client = redis.Redis.from_url(redis_url)
    ttl = client.pttl("replay-proxy:session:kept")
    client.close()
    assert [s["session"] for s in sessions] == ["kept"] and ttl == -1  # no expiry set


def test_the_session_list_comes_a_page_at_a_time(proxy: ProxyFactory) -> None:
    with proxy() as url:
        for n in range(7):
            ask(url, f"s{n}", "t")
        pages, params = [], {"limit": 3}
        while True:
            page = httpx.get(admin(url), params=params).json()
            pages.append([s["session"] for s in page["data"]])
            if not page["has_more"]:
                assert page["next_cursor"] is None
                break
            params["cursor"] = page["next_cursor"]
        too_many = httpx.get(admin(url), params={"limit": 5000})
        bad_cursor = httpx.get(admin(url), params={"cursor": "nope"})
    assert pages == [["s0", "s1", "s2"], ["s3", "s4", "s5"], ["s6"]]
    assert too_many.status_code == 400 and "limit" in too_many.json()["error"]["message"]
    assert bad_cursor.status_code == 400 and bad_cursor.json()["error"]["param"] == "cursor"


def test_the_status_page_shows_a_page_of_the_newest_sessions(proxy: ProxyFactory) -> None:
    with proxy() as url:
        root = url.removesuffix("/v1")
        for n in range(105):
            ask(url, f"s{n:03}", "t")
        first = httpx.get(root + "/replay/ui")
        older = re.search(r'href="(/replay/ui\?cursor=[^"]+)">older sessions', first.text)
        assert older is not None
        second = httpx.get(root + older[1].replace("&amp;", "&"))
    shown = re.findall(r"<code>(s\d+)</code>", first.text)
    assert shown[:2] == ["s104", "s103"] and len(shown) == 100
    assert "105 sessions" in first.text
    assert re.findall(r"<code>(s\d+)</code>", second.text) == [f"s{n:03}" for n in range(4, -1, -1)]
    assert "older sessions" not in second.text and 'href="/replay/ui">newest' in second.text
