"""Resumed runs with subagents at the scale of a training step: many rollouts, each resumed from
a Claude Code transcript and its child's (the real files in tests/fixtures/harness_logs/
claude-code, laid out as Claude Code keeps them), fenced, each ending with its restore verdict.

Two proxy workers on a Redis store, `--fence`, `--upstream 'http://gateway/sessions/{session}/v1'`
and `--upstream-header 'x-rollout-id: {session}'`. Each rollout is a client speaking the Messages
API as Claude Code does, knowing nothing but its base URL `/s/{rollout}/t/sess/k/3`: a tool-less
title call (the fence refuses it), the root's three recorded turns with the workspace's outputs,
the child the root's `Agent` call spawns (its own two recorded turns, under a new agent id), then
the live call after the cut, which must reach the gateway as its own rollout, told the cut and the
verdict. Then the runner reads each rollout's verdict from the admin API. Reported: rollouts per
second, requests per second, verdicts, and any crossed lane (a child answered from another
rollout's lane, a live call reaching the gateway as another rollout) or error.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.procs import ROOT, process, proxy

ROLLOUTS = 1000
CONCURRENCY = 32
WORKERS = 2
K = 3  # the cut: the root's recorded turns replayed before the hand-off
FIXTURES = ROOT / "tests" / "fixtures" / "harness_logs" / "claude-code"
AGENT = "a9aeb050a6110cc3d"  # the recorded child
SYSTEM = "You are Claude Code, Anthropic's official CLI for Claude."
TASK = "Set up the greeting files in this repository."
TOOLS = [
    {"name": n, "description": n, "input_schema": {"type": "object"}} for n in ("Bash", "Agent")
]
OUTPUTS = {  # the workspace's outputs, as in the recorded run
    "toolu_cc_1": "existing.txt",
    "toolu_cc_2": "old value",
    "toolu_cc_4": "Exit code 1\ncat: missing.txt: No such file or directory",
    "toolu_sub_1": "1 existing.txt",
}


def layout(folder: Path) -> None:
    children = folder / "sess" / "subagents"
    children.mkdir(parents=True)
    shutil.copy(FIXTURES / "session.jsonl", folder / "sess.jsonl")
    shutil.copy(FIXTURES / "subagent.jsonl", children / f"agent-{AGENT}.jsonl")
    shutil.copy(FIXTURES / "subagent.meta.json", children / f"agent-{AGENT}.meta.json")


def _report(child: str) -> list[dict[str, str]]:
    usage = (
        f"agentId: {child} (use SendMessage with to: '{child}', summary: '<5-10 word recap>' to "
        "continue this agent)\n<usage>subagent_tokens: 31\ntool_uses: 1\nduration_ms: 940</usage>"
    )
    return [{"type": "text", "text": "existing.txt has 1 line."}, {"type": "text", "text": usage}]


async def _rollouts(root: str, count: int, concurrency: int) -> dict[str, Any]:
    import aiohttp

    crossed: list[str] = []
    errors: list[str] = []
    verdicts: dict[str, int] = {}
    counts = {"requests": 0, "fenced": 0}
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def post(
        session: aiohttp.ClientSession, url: str, messages: list[Any], **headers: str
    ) -> tuple[int, Any, Any]:
        body = {"model": "claude-test", "max_tokens": 100, "system": SYSTEM,
                "messages": messages, "tools": TOOLS}  # fmt: skip
        async with session.post(url, json=body, headers=headers) as answer:
            counts["requests"] += 1
            return answer.status, await answer.json(), answer.headers

    def step(messages: list[Any], data: Any, output: Any) -> None:
        calls = [b for b in data["content"] if b["type"] == "tool_use"]
        messages.append({"role": "assistant", "content": data["content"]})
        content = [
            {"type": "tool_result", "tool_use_id": c["id"], "content": output(c)} for c in calls
        ]
        messages.append({"role": "user", "content": content})

    async def child(session: aiohttp.ClientSession, url: str, rollout: str, agent: str) -> bool:
        """The child the root's Agent call spawned: its two recorded turns, from its own lane."""
        messages: list[Any] = [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>x</system-reminder>"},
            {"type": "text", "text": "Count the lines of existing.txt and report back."}]}]  # fmt: skip
        for turn in (1, 2):
            status, data, headers = await post(
                session, url, messages, **{"x-claude-code-agent-id": agent}
            )
            if status != 200 or headers.get("x-replay-turn") != f"{turn}/2":
                crossed.append(
                    f"{rollout} child turn {turn}: {status} {headers.get('x-replay-turn')}"
                )
                return False
            if turn == 1:
                step(messages, data, lambda c: OUTPUTS[c["id"]])
        return True

    async def one(session: aiohttp.ClientSession, i: int) -> None:
        rollout = f"rollout-{i}"
        url = f"{root}/s/{rollout}/t/sess/k/{K}/v1/messages"
        agent = f"{i:08x}c0ffee"  # the live child's id: new on every run
        title = [{"role": "user", "content": "Title for this conversation"}]
        body = {"model": "claude-haiku", "max_tokens": 20, "messages": title}
        async with session.post(url, json=body) as answer:  # a side call before the cut
            counts["requests"] += 1
            await answer.read()
            if answer.status == 403:
                counts["fenced"] += 1
            else:
                errors.append(f"{rollout} title: {answer.status}, not fenced")
        messages: list[Any] = [{"role": "user", "content": TASK}]
        for k in range(K + 1):
            status, data, headers = await post(session, url, messages)
            if status != 200:
                errors.append(f"{rollout} request {k + 1}: {status} {str(data)[:200]}")
                return
            if k == K:  # the hand-off: the gateway, as this rollout, told the cut
                said = data["content"][0]["text"]
                if said != f"live {rollout} {rollout}":
                    crossed.append(f"{rollout} got {said!r}")
                if headers.get("x-replay-handoff-turn") != str(K):
                    errors.append(
                        f"{rollout}: hand-off said {headers.get('x-replay-handoff-turn')}"
                    )
                return
            if headers.get("x-replay-session") != rollout:
                crossed.append(f"{rollout} answered as {headers.get('x-replay-session')}")
            calls = [b for b in data["content"] if b["type"] == "tool_use"]
            spawns = any(c["name"] == "Agent" for c in calls)
            if spawns and not await child(session, url, rollout, agent):
                return
            step(
                messages,
                data,
                lambda c: _report(agent) if c["name"] == "Agent" else OUTPUTS[c["id"]],
            )

    async def client(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            await one(session, queue.get_nowait())

    async def verdict(session: aiohttp.ClientSession, i: int) -> None:
        async with session.get(f"{root}/replay/sessions/rollout-{i}/restore?wait=60") as answer:
            said = (await answer.json())["verdict"]
            verdicts[said] = verdicts.get(said, 0) + 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(concurrency)))
        seconds = time.perf_counter() - started
        for first in range(0, count, concurrency):
            await asyncio.gather(
                *(verdict(session, i) for i in range(first, min(first + concurrency, count)))
            )
    return {
        "rollouts": count,
        "handoff_turn": K,
        "requests": counts["requests"],
        "seconds": round(seconds, 2),
        "rollouts_per_s": round(count / seconds, 1),
        "requests_per_s": round(counts["requests"] / seconds, 1),
        "fenced": counts["fenced"],
        "verdicts": verdicts,
        "crossed": len(crossed),
        "errors": len(errors),
        "examples": (crossed + errors)[:5],
    }


def _drive(root: str, count: int, concurrency: int, out: Any) -> None:
    """In a process of its own, as a runner is."""
    import uvloop

    out.put(uvloop.run(_rollouts(root, count, concurrency)))


def suite(
    redis_url: str, *, rollouts: int = ROLLOUTS, concurrency: int = CONCURRENCY
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        layout(Path(folder))
        with process(sys.executable, "-m", "bench.gateway") as (gateway, _):
            args = [
                "--workers", str(WORKERS), "--store", redis_url, "--trajectory-dir", folder,
                "--upstream", f"{gateway}/sessions/{{session}}/v1",
                "--upstream-header", "x-rollout-id: {session}", "--fence",
            ]  # fmt: skip
            with proxy(*args) as (url, _):
                root = url.removesuffix("/v1")
                out: multiprocessing.Queue[dict[str, Any]] = multiprocessing.Queue()
                driver = multiprocessing.Process(
                    target=_drive, args=(root, rollouts, concurrency, out)
                )
                driver.start()
                result = out.get()
                driver.join()
    return {"workers": WORKERS, "concurrency": concurrency, **result}


def met(r: dict[str, Any]) -> bool:
    fenced_all = r["fenced"] == r["rollouts"]
    restored_all = r["verdicts"].get("restored", 0) == r["rollouts"]
    return bool(r["crossed"] == 0 and r["errors"] == 0 and fenced_all and restored_all)
