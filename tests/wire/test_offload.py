"""A body over --offload-bytes is read and decided in a worker process, never in the one serving
every connection: over real sockets, with the threshold set low enough for a test's requests, a
session is served, spliced, recorded, dumped and strictly replayed exactly as it is when nothing
is handed over, and errors keep the shape of the API asked."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.conftest import ROOT, ProxyFactory
from tests.helpers.agent import RECORDED, TOOLS, agent_step, client, follow, start_messages
from tests.helpers.load import metric
from tests.helpers.servers import FakeUpstream, running, text

HANDED_OVER = 100  # bytes: every request of these tests is larger


def _session(
    proxy: ProxyFactory,
    write_trajectory: Callable[..., Path],
    folder: Path,
    offload_bytes: int,
) -> dict[str, Any]:
    """Two scripted turns, then live with the recording's user messages spliced in; recorded
    and dumped. What the client, the upstream, the recording and the dump saw."""
    fake = FakeUpstream()
    fake.then(text("Summary: notes.txt was made."))
    settings = {"record_dir": folder / "rec", "dump_dir": folder / "dumps"}
    with (
        running(fake.app) as upstream,
        proxy(
            upstream=upstream + "/v1",
            trajectory=[write_trajectory(RECORDED)],
            offload_bytes=offload_bytes,
            **settings,
        ) as url,
    ):
        c = client(url, **{"x-session-affinity": "big-1"})
        messages = start_messages()
        seen = []
        for stream in (False, True, False):
            answer, headers = agent_step(c, messages, stream=stream)
            seen.append((answer["content"], [t["id"] for t in answer["tool_calls"]],
                         headers.get("x-replay-turn"), headers.get("x-replay-spliced")))  # fmt: skip
            if answer["tool_calls"]:
                follow(messages, answer)
        metrics = httpx.get(url.removesuffix("/v1") + "/metrics").text
    lines = [orjson.loads(x) for x in (folder / "rec" / "big-1.jsonl").read_bytes().splitlines()]
    [dump] = [orjson.loads(p.read_bytes()) for p in (folder / "dumps").rglob("*.json")]
    return {
        "answers": seen,
        "upstream": [r.json for r in fake.posts()],
        "recorded": [(x["source"], x["request"], x.get("forwarded")) for x in lines],
        "dumped": dump["messages"],
        "metrics": metrics,
    }


def test_a_session_handed_over_is_served_as_one_that_is_not(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path], tmp_path: Path
) -> None:
    here = _session(proxy, write_trajectory, tmp_path / "here", offload_bytes=0)
    there = _session(proxy, write_trajectory, tmp_path / "there", offload_bytes=HANDED_OVER)
    assert there["answers"] == here["answers"]
    assert [a[2] for a in there["answers"]] == ["1/2", "2/2", None]
    assert there["answers"][2][3] == "2"  # the recording's two later user messages, spliced
    assert there["upstream"] == here["upstream"]
    spliced = [m["content"] for m in there["upstream"][0]["messages"] if m["role"] == "user"]
    assert "Remember to use ls -la." in spliced and "Now summarise what you did." in spliced
    assert there["recorded"] == here["recorded"]
    assert there["recorded"][2][2] == there["upstream"][0]  # forwarded: the spliced body
    assert there["dumped"] == here["dumped"] == there["upstream"][0]["messages"]
    assert metric(there["metrics"], "replay_proxy_offloaded_total", step="read") == 3
    assert metric(there["metrics"], "replay_proxy_offloaded_total", step="decide") == 3
    assert "replay_proxy_offloaded_total{" not in here["metrics"]


def test_strict_replay_of_a_recording_handed_over(
    proxy: ProxyFactory, write_trajectory: Callable[..., Path], tmp_path: Path
) -> None:
    """Main lane and a side call (a title) from the recording; a changed request is a
    divergence with its verdict, all decided in the worker."""
    recording = tmp_path / "rec"
    fake = FakeUpstream()
    fake.then(text("A title"))
    title = {"model": "m", "messages": [{"role": "user", "content": "Title this: " + "x" * 200}]}
    with (
        running(fake.app) as upstream,
        proxy(
            upstream=upstream + "/v1", trajectory=[write_trajectory(RECORDED)], record_dir=recording
        ) as url,
    ):
        c = client(url, **{"x-session-affinity": "strict-1"})
        messages = start_messages()
        answer, _ = agent_step(c, messages, stream=False)
        httpx.post(
            url + "/chat/completions", json=title, headers={"x-session-affinity": "strict-1"}
        )
    [recorded] = recording.iterdir()
    with proxy(trajectory=[recorded], mode="strict", offload_bytes=HANDED_OVER) as url:
        root = url.removesuffix("/v1")
        c = client(url, **{"x-session-affinity": "strict-2"})
        messages = start_messages()
        answer, headers = agent_step(c, messages, stream=False)
        side = httpx.post(
            url + "/chat/completions", json=title, headers={"x-session-affinity": "strict-2"}
        )
        changed = start_messages()
        changed[1]["content"] += " Also delete the production database."
        diverged = httpx.post(
            url + "/chat/completions",
            json={"model": "gpt-test", "messages": changed, "tools": TOOLS},
            headers={"x-session-affinity": "strict-3", "x-replay-trajectory": recorded.stem},
        )
        metrics = httpx.get(root + "/metrics").text
    assert headers["x-replay-turn"] == "1/1" and answer["tool_calls"][0]["id"] == "call_A"
    assert side.status_code == 200 and side.headers["x-replay-source"] == "recorded"
    assert side.json()["choices"][0]["message"]["content"] == "A title"
    assert diverged.status_code == 404
    replay = diverged.json()["error"]["replay"]
    assert replay["kind"] == "request" and replay["verdict"] == "changed"
    assert "production database" in diverged.json()["error"]["message"]
    assert metric(metrics, "replay_proxy_offloaded_total", step="match") == 1
    assert metric(metrics, "replay_proxy_offloaded_total", step="decide") == 2


@pytest.mark.parametrize(
    ("path", "body", "kind"),
    [
        ("/v1/messages", b'{"model": "m", "messages": [' + b" " * 200, "anthropic"),
        ("/v1/chat/completions", b'{"a":' * 300 + b"1" + b"}" * 300, "openai"),
    ],
)
def test_a_bad_body_handed_over_is_refused_in_its_apis_shape(
    proxy: ProxyFactory, path: str, body: bytes, kind: str
) -> None:
    with proxy(offload_bytes=HANDED_OVER) as url:
        answer = httpx.post(
            url.removesuffix("/v1") + path,
            content=body,
            headers={"content-type": "application/json"},
        )
    assert answer.status_code == 400
    if kind == "anthropic":
        assert answer.json()["type"] == "error" and "not valid JSON" in answer.text
    else:
        assert answer.json()["error"]["code"] == "nested_too_deep"


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(
    sys.platform != "linux", reason="a worker follows its parent through Linux's prctl"
)
def test_the_worker_ends_with_the_proxy_however_it_ends(
    write_trajectory: Callable[..., Path],
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy", "serve", "--port", "0", "--insecure-admin",
         "--offload-bytes", str(HANDED_OVER), "--trajectory", str(write_trajectory(RECORDED))],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        url = process.stdout.readline().rsplit("listening on ", 1)[1].strip()
        agent_step(client(url, **{"x-session-affinity": "w"}), start_messages(), stream=False)
        workers = [
            c
            for c in _children(process.pid)
            if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()
        ]
        assert len(workers) == 1
        handles = [os.pidfd_open(w) for w in workers]
    finally:
        process.send_signal(signal.SIGKILL)  # no shutdown at all: it cannot tell its workers
        process.wait(timeout=60)
    ready, _, _ = select.select(handles, [], [], 60)  # readable once the process has ended
    assert len(ready) == len(handles)
