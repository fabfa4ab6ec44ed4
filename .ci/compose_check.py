"""CI: the compose stack really works. Run after `docker compose -f compose.yaml -f
docker/compose.ci.yaml up -d --wait` (and, with --replicas, the replicas profile): a scripted and a
forwarded request through the sidecar proxy, the example agent end to end, and two replicas
sharing one session through Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).parent.parent
EXAMPLE = json.loads((ROOT / "examples" / "greeting.json").read_text())
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
TOKEN = {"authorization": f"Bearer {os.environ['REPLAY_PROXY_ADMIN_TOKEN']}"}  # .ci/run's


def check(condition: bool, what: str) -> None:
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        sys.exit(1)


def sidecar(port: str) -> None:
    base = f"http://127.0.0.1:{port}/v1"
    scripted = httpx.post(
        base + "/chat/completions",
        json={"model": "m", "messages": EXAMPLE[:2], "tools": TOOLS},
        headers={"x-session-affinity": "ci-scripted"},
    )
    check(
        scripted.status_code == 200 and scripted.headers["x-replay-source"] == "scripted",
        f"scripted answer: {scripted.status_code} {scripted.headers.get('x-replay-source')}",
    )
    check(
        scripted.json()["choices"][0]["message"]["tool_calls"][0]["id"] == "call_greet_1",
        "the recorded tool call",
    )
    forwarded = httpx.post(
        base + "/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    )
    check(
        forwarded.headers.get("x-replay-source") == "upstream" and "All done" in forwarded.text,
        f"forwarded answer: {forwarded.status_code}",
    )
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    check('source="scripted"' in metrics and 'source="upstream"' in metrics, "/metrics counts both")
    ui = httpx.get(f"http://127.0.0.1:{port}/replay/ui", headers=TOKEN)
    check(ui.status_code == 200 and "ci-scripted" in ui.text, "/replay/ui shows the session")
    compose = [
        "docker",
        "compose",
        "-f",
        "compose.yaml",
        "-f",
        "docker/compose.ci.yaml",
        "--profile",
        "demo",
    ]
    agent = subprocess.run(
        [*compose, "run", "--rm", "agent"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    print(agent.stdout)
    check(
        agent.returncode == 0 and "[scripted 3/3]" in agent.stdout and "[upstream" in agent.stdout,
        "the example agent replays 3 turns, then goes live",
    )


def replicas(port_a: str, port_b: str) -> None:
    session = {"x-session-affinity": "ci-replicas"}
    a = httpx.post(
        f"http://127.0.0.1:{port_a}/v1/chat/completions",
        json={"model": "m", "messages": EXAMPLE[:2], "tools": TOOLS},
        headers=session,
    )
    call = a.json()["choices"][0]["message"]["tool_calls"][0]
    history = [
        *EXAMPLE[:2],
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "content": ""},
    ]
    b = httpx.post(
        f"http://127.0.0.1:{port_b}/v1/chat/completions",
        json={"model": "m", "messages": history, "tools": TOOLS},
        headers=session,
    )
    check(
        (a.headers["x-replay-turn"], b.headers["x-replay-turn"]) == ("1/3", "2/3"),
        "turn 1 from replica A, turn 2 from replica B",
    )
    status = httpx.get(
        f"http://127.0.0.1:{port_a}/replay/sessions/ci-replicas", headers=TOKEN
    ).json()
    check(status["turns_served"] == 2, "replica A reports the turn replica B served (one Redis)")


if __name__ == "__main__":
    if sys.argv[1] == "sidecar":
        sidecar(sys.argv[2])
    else:
        replicas(sys.argv[2], sys.argv[3])
