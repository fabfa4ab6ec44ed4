"""openai-agents with one @function_tool that runs a shell command (run by the harness's venv).

Env: LLM_BASE (the proxy, without /v1), AGENTS_MODE (run | streamed), TASK.
Exit 0 when the run ends with a final output.
"""

import asyncio
import os
import subprocess
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)  # otherwise traces go to api.openai.com


@function_tool
def run_shell(command: str) -> str:
    """Run a shell command in the current directory and return its output and exit code."""
    p = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
    return f"exit_code={p.returncode}\n{p.stdout}{p.stderr}"


async def main() -> int:
    client = AsyncOpenAI(
        base_url=os.environ["LLM_BASE"] + "/v1", api_key="sk-harness", max_retries=2
    )
    model = OpenAIChatCompletionsModel(model="agent-model", openai_client=client)
    agent = Agent(
        name="shell", instructions="Use run_shell to do the task.", tools=[run_shell], model=model
    )
    if os.environ.get("AGENTS_MODE") == "streamed":
        result = Runner.run_streamed(agent, os.environ["TASK"], max_turns=10)
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, os.environ["TASK"], max_turns=10)
    print("FINAL:", result.final_output)
    return 0 if result.final_output else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
