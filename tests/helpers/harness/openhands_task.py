"""OpenHands SDK with its default CLI agent (terminal, file_editor, task_tracker, finish, think).

Env: LLM_BASE (the proxy, without /v1), TASK, PERSISTENCE_DIR (where the SDK keeps its event
store). Exit 0 when the conversation FINISHED.
"""

import os
import sys

from openhands.sdk import LLM, Conversation
from openhands.tools.preset.default import get_default_agent
from pydantic import SecretStr

llm = LLM(
    model="openai/agent-model",
    base_url=os.environ["LLM_BASE"] + "/v1",
    api_key=SecretStr("sk-harness"),
    usage_id="agent",
    num_retries=2,
    retry_min_wait=1,
    retry_max_wait=2,
)
agent = get_default_agent(llm=llm, cli_mode=True)
conversation = Conversation(
    agent=agent,
    workspace=os.getcwd(),
    max_iteration_per_run=12,
    visualizer=None,
    persistence_dir=os.environ["PERSISTENCE_DIR"],
)
conversation.send_message(os.environ["TASK"])
conversation.run()
status = conversation.state.execution_status
print("STATUS:", status)
conversation.close()
sys.exit(0 if str(getattr(status, "value", status)).lower() == "finished" else 1)
