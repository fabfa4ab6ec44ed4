"""A harness that calls its tools through text, with the official openai SDK as its client.

It speaks the XML action protocol of SWE-Gym / R2E-style environments (and of OpenHands'
non-native function calling): the model answers `<function=execute_bash><parameter=command>...`,
the harness runs the command for real in its workspace and sends the output back as a user
message; `<function=finish>` ends the run. No request carries tools. A title call (another system
prompt, no tools) goes first, as harnesses make them.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai

SYSTEM = (
    "You are a coding agent. To run a shell command, answer with\n"
    "<function=execute_bash>\n<parameter=command>COMMAND</parameter>\n</function>\n"
    "When you are done, answer with <function=finish>\n</function>"
)
TITLE_SYSTEM = "You are a title generator. Answer with a short title for the task."
TASK = "Create hello.txt holding hello, then show the directory."
ACTION = re.compile(r"<function=(\w+)>(.*?)</function>", re.S)
PARAMETER = re.compile(r"<parameter=(\w+)>(.*?)</parameter>", re.S)


def action(command: str, thought: str = "Next step.") -> str:
    return (
        f"{thought}\n<function=execute_bash>\n<parameter=command>{command}</parameter>\n</function>"
    )


FINISH = "Done.\n<function=finish>\n</function>"


def observation(output: str, code: int = 0) -> str:
    return (
        f"EXECUTION RESULT of [execute_bash]:\n{output}\n[Command finished with exit code {code}]"
    )


@dataclass
class Step:
    content: str
    headers: dict[str, str]


def ask(
    c: openai.OpenAI, messages: list[dict[str, Any]], *, stream: bool
) -> tuple[str, dict[str, str]]:
    if stream:
        raw = c.chat.completions.with_raw_response.create(
            model="gpt-test",
            messages=messages,
            stream=True,  # type: ignore[arg-type]
        )
        parts = [ch.delta.content or "" for chunk in raw.parse() for ch in chunk.choices]
        return "".join(parts), dict(raw.headers)
    raw = c.chat.completions.with_raw_response.create(model="gpt-test", messages=messages)  # type: ignore[arg-type]
    return raw.parse().choices[0].message.content or "", dict(raw.headers)


def title(c: openai.OpenAI, task: str = TASK) -> tuple[str, dict[str, str]]:
    """The side call: the same task under another system prompt."""
    return ask(
        c,
        [{"role": "system", "content": TITLE_SYSTEM}, {"role": "user", "content": task}],
        stream=False,
    )


def run_agent(
    c: openai.OpenAI, workspace: Path, *, task: str = TASK, stream: bool = False, steps: int = 8
) -> list[Step]:
    """Run to <function=finish> (or an answer with no action, or the step limit)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task},
    ]
    done: list[Step] = []
    for _ in range(steps):
        content, headers = ask(c, messages, stream=stream)
        done.append(Step(content, headers))
        messages.append({"role": "assistant", "content": content})
        found = ACTION.search(content)
        if found is None or found.group(1) == "finish":
            break
        command = dict(PARAMETER.findall(found.group(2)))["command"]
        result = subprocess.run(
            ["bash", "-c", command], cwd=workspace, capture_output=True, text=True, timeout=30
        )
        messages.append(
            {
                "role": "user",
                "content": observation(result.stdout + result.stderr, result.returncode),
            }
        )
    return done
