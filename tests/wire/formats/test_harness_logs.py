"""Harness logs wherever a trajectory is accepted: --trajectory-dir (files and event stores), the
x-replay-trajectory header, and the admin API; served with the recorded ids, over real sockets."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import openai

from tests.conftest import ROOT, ProxyFactory
from tests.helpers.servers import FakeUpstream

LOGS = ROOT / "tests" / "fixtures" / "harness_logs"


def tools(*names: str) -> list[Any]:
    return [{"type": "function", "function": {"name": n, "parameters": {}}} for n in names]


def first_turn(url: str, headers: dict[str, str], offered: list[Any]) -> tuple[list[str], str]:
    c = openai.OpenAI(base_url=url, api_key="sk", max_retries=0, default_headers=headers)
    raw = c.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": "anything"}], tools=offered
    )
    message = raw.parse().choices[0].message
    return [call.id for call in message.tool_calls or []], raw.headers["x-replay-turn"]


def test_a_trajectory_dir_of_harness_logs(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str], tmp_path: Path
) -> None:
    _, upstream_url = upstream
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(LOGS / "opencode" / "session.json", folder / "oc-run.json")
    shutil.copytree(LOGS / "openhands" / "sdk-conversation", folder / "oh-run")
    with proxy(upstream=upstream_url, trajectory_dir=folder) as url:
        opencode = first_turn(
            url, {"x-replay-trajectory": "oc-run", "x-session-affinity": "a"}, tools("bash", "task")
        )
        openhands = first_turn(
            url,
            {"x-replay-trajectory": "oh-run", "x-session-affinity": "b"},
            tools("terminal", "file_editor"),
        )
    assert opencode == (["call_oc_1", "call_oc_2"], "1/7")
    assert openhands == (["call_oh_1", "call_oh_2"], "1/6")


def test_the_admin_api_takes_a_harness_log(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    _, upstream_url = upstream
    with proxy(upstream=upstream_url) as url:
        root = url.removesuffix("/v1")
        data = (LOGS / "opencode" / "session.json").read_bytes()
        put = httpx.put(f"{root}/replay/sessions/s1", content=data)
        served = first_turn(url, {"x-session-affinity": "s1"}, tools("bash"))
        broken = httpx.put(f"{root}/replay/sessions/s2", content=b'{"info": {"id": "ses_x"}}')
    assert put.status_code == 200 and put.json()["script"]["turns_total"] == 7, put.text
    assert [n["reason"][:16] for n in put.json()["script"]["skipped"]][:1] == ["subagent session"]
    assert served == (["call_oc_1", "call_oc_2"], "1/7")
    assert broken.status_code == 400
    assert "not a trajectory in a format this proxy reads; closest is opencode" in broken.text
