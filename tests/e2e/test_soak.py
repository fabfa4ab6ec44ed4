"""A bounded soak: 100 concurrent sessions for a couple of minutes (REPLAY_PROXY_SOAK_SECONDS),
mixing scripted and forwarded turns, streaming and not, while the upstream fails on purpose (500s,
streams cut mid-way, slow answers). Afterwards every session's status is exact, nothing leaked
(upstream connections, file handles, tasks) and memory stayed flat.

Marked `soak`: `pytest -m "not soak"` skips it locally; .ci/run runs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.responses import Response

from bench.procs import rss_bytes
from tests.helpers.load import proxy_process
from tests.helpers.servers import (
    FakeUpstream,
    Seen,
    all_sessions,
    drop_after_first_event,
    running,
    status,
    text,
)

pytestmark = pytest.mark.soak

SESSIONS = 100
TURNS = 5
SECONDS = float(os.environ.get("REPLAY_PROXY_SOAK_SECONDS", "90"))
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def trajectory(i: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"soak task {i}"}]
    for k in range(TURNS):
        call = {
            "id": f"s{i}-c{k}",
            "type": "function",
            "function": {"name": "bash", "arguments": "{}"},
        }
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call["id"], "content": "ok"},
        ]
    return messages


def faulty(seed: int) -> Any:
    """The upstream: mostly right, sometimes a 500, a stream cut mid-way, or a 429."""
    rng = random.Random(seed)

    def answer(seen: Seen) -> Response:
        roll = rng.random()
        if roll < 0.08:
            return status(500, {"error": {"message": "upstream trouble"}})(seen)
        if roll < 0.12:
            return status(429, {"error": {"message": "slow down"}}, {"retry-after": "0"})(seen)
        if roll < 0.18 and seen.json.get("stream"):
            return drop_after_first_event()(seen)
        return text("live and done")(seen)

    return answer


class Tally:
    """What one session's client saw: the proxy's status must agree with it exactly."""

    def __init__(self) -> None:
        self.scripted = 0
        self.forwarded = 0


async def agent(
    client: httpx.AsyncClient,
    url: str,
    i: int,
    tally: Tally,
    stop: asyncio.Event,
    rng: random.Random,
) -> None:
    """Runs session i again and again (its turns follow from its history): 5 scripted turns, then
    live until an answer arrives whole; faults are retried, as a harness does."""
    headers = {"x-session-affinity": f"soak-{i:03d}"}
    while not stop.is_set():
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"soak task {i}"}]
        while not stop.is_set():
            stream = rng.random() < 0.5
            body = {"model": "m", "messages": messages, "tools": TOOLS, "stream": stream}
            try:
                r = await client.post(url + "/chat/completions", json=body, headers=headers)
                content = r.content
            except httpx.TransportError:  # a stream cut mid-way by the upstream: ask again
                tally.forwarded += 1
                continue
            source = r.headers.get("x-replay-source")
            if source == "scripted":
                tally.scripted += 1
            elif source == "upstream":
                tally.forwarded += 1
            if r.status_code != 200 or b"upstream_stream_broken" in content:
                continue
            if source == "scripted":
                message = _message(r, stream)
                messages += [
                    message,
                    {
                        "role": "tool",
                        "tool_call_id": message["tool_calls"][0]["id"],
                        "content": "ok",
                    },
                ]
            else:
                break  # a live answer arrived whole: this run is over; start the session over


def _message(r: httpx.Response, stream: bool) -> dict[str, Any]:
    if not stream:
        message: dict[str, Any] = r.json()["choices"][0]["message"]
        return message
    for line in r.text.splitlines():
        if '"tool_calls"' in line:
            call = json.loads(line.removeprefix("data: "))["choices"][0]["delta"]["tool_calls"][0]
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": call["id"], "type": "function", "function": call["function"]}
                ],
            }
    raise AssertionError(r.text)


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_soak(tmp_path: Path) -> None:
    folder = tmp_path / "trajs"
    folder.mkdir()
    for i in range(SESSIONS):
        (folder / f"soak-{i:03d}.json").write_text(json.dumps(trajectory(i)))
    fake = FakeUpstream(fallback=faulty(7))
    tallies = [Tally() for _ in range(SESSIONS)]
    with (
        running(fake.app) as upstream,
        proxy_process("--upstream", upstream + "/v1", "--trajectory-dir", str(folder)) as (
            url,
            process,
        ),
    ):
        root = url.removesuffix("/v1")
        idle = httpx.get(root + "/healthz").json()
        files_at_start = open_files(process.pid)

        async def run(seconds: float) -> None:
            stop = asyncio.Event()
            limits = httpx.Limits(max_connections=SESSIONS, max_keepalive_connections=SESSIONS)
            async with httpx.AsyncClient(timeout=60, limits=limits) as client:
                agents = [
                    asyncio.create_task(agent(client, url, i, tallies[i], stop, random.Random(i)))
                    for i in range(SESSIONS)
                ]
                await asyncio.sleep(seconds)  # the soak's length, not synchronisation
                stop.set()
                await asyncio.gather(*agents)

        asyncio.run(run(SECONDS / 3))
        rss_early = rss_bytes(process.pid)
        asyncio.run(run(2 * SECONDS / 3))
        rss_late = rss_bytes(process.pid)
        after = httpx.get(root + "/healthz").json()
        files_at_end = open_files(process.pid)
        sessions = {s["session"]: s for s in all_sessions(root)}

    totals = Counter(
        scripted=sum(t.scripted for t in tallies), forwarded=sum(t.forwarded for t in tallies)
    )
    assert totals["scripted"] > 20 * SESSIONS and totals["forwarded"] > 5 * SESSIONS, (
        totals
    )  # it really ran
    for i, tally in enumerate(tallies):
        s = sessions[f"soak-{i:03d}"]
        assert s["turns_served"] == TURNS and s["script"]["name"] == f"soak-{i:03d}"
        assert s["scripted_responses"] == tally.scripted, (i, s, vars(tally))
        assert s["forwarded"]["main"] == tally.forwarded, (i, s, vars(tally))
        assert s["divergences"] == 0 and s["errors"] == 0
    # nothing leaked: the tasks of idle serving, pooled upstream connections only, the same files
    assert after["tasks"] <= idle["tasks"] + 2, (idle, after)
    assert (
        after["upstream_connections"]["open"] == after["upstream_connections"]["idle"] <= SESSIONS
    )
    assert files_at_end <= files_at_start + after["upstream_connections"]["open"] + 5, (
        files_at_start,
        files_at_end,
    )
    assert rss_late - rss_early < 32 * 2**20, (rss_early, rss_late)  # flat: no growth with requests
