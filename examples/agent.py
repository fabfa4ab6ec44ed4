"""A minimal agent loop, to watch a replay: it asks the model (through the proxy) what to do,
runs the bash commands it gets in its work folder, and sends the results back, until the model
answers with text only. Only the standard library and httpx.

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 python examples/agent.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import httpx

BASE = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")
WORK = os.environ.get("AGENT_WORKDIR") or tempfile.mkdtemp(prefix="agent-")
SYSTEM = "You are a helpful assistant that can interact with a computer."
TASK = os.environ.get(
    "AGENT_TASK",
    "Create a small Python greeting script in greet.py that prints 'hello, world', run it, "
    "and save its output to out.txt.",
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a bash command in the work folder.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def main() -> int:
    messages: list[dict] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": TASK},
    ]
    headers = {
        "authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', 'unused')}",
        "x-session-affinity": os.environ.get("AGENT_SESSION", "demo-agent"),
    }
    with httpx.Client(base_url=BASE, headers=headers, timeout=600) as client:
        for step in range(1, 21):
            r = client.post(
                "/chat/completions",
                json={
                    "model": os.environ.get("AGENT_MODEL", "agent-model"),
                    "messages": messages,
                    "tools": TOOLS,
                },
            )
            source = r.headers.get("x-replay-source", "?")
            if r.status_code != 200:
                print(f"step {step}: HTTP {r.status_code} ({source}): {r.text}", file=sys.stderr)
                return 1
            message = r.json()["choices"][0]["message"]
            calls = message.get("tool_calls") or []
            print(
                f"step {step} [{source} {r.headers.get('x-replay-turn', '')}]: {message.get('content') or ''}"
            )
            messages.append(
                {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
                if calls
                else {"role": "assistant", "content": message.get("content")}
            )
            if not calls:
                print(f"done; work folder: {WORK}")
                return 0
            for call in calls:
                command = json.loads(call["function"]["arguments"])["command"]
                run = subprocess.run(
                    command, shell=True, cwd=WORK, capture_output=True, text=True, timeout=120
                )
                print(f"  $ {command}\n{run.stdout}{run.stderr}", end="")
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": run.stdout + run.stderr}
                )
    print("gave up after 20 steps", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
