"""Text-based scripts: runs of harnesses that call their tools through text.

mini-swe-agent's text mode, SWE-agent without function calling, and RL environments whose actions
are XML (`<function=...>`) or fenced blocks send no `tools`: the model writes its action into the
answer, the harness runs it, and sends the output back as the next user message (the
observation). A script whose turns carry no tool call at all is read that way
(`Trajectory.text_based`):

- every assistant message is a turn, served as a text answer (finish_reason "stop");
- the user messages between two turns are the observation of the first: the harness sends them
  itself, so they are compared with the recorded ones as tool results are
  (--on-observation-divergence), never spliced;
- a tool-less request is a side call (a title, a summary, an unrelated session) unless its
  conversation is the script's: the same system prompt (none, if the script has none) and task,
  masks applied (`belongs`). Only
  such a request binds a session or takes a turn; from there the engine derives the turn from the
  history as for tool calls, and a different assistant text in it is a divergence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from proxy.replay.conversation import Conversation
from proxy.replay.normalize import prompt
from proxy.replay.trajectory import Trajectory


def belongs(conv: Conversation, script: Trajectory, masks: Sequence[re.Pattern[str]] = ()) -> bool:
    """Whether a tool-less request is the text-based script's own conversation."""
    if not script.text_based or (script.task is None) != (conv.task is None):
        return False
    if script.task is not None and prompt(conv.task or "", masks) != prompt(script.task, masks):
        return False  # a script with no task (no user line was recorded) matches on its prompt
    return prompt(conv.system, masks) == prompt(script.system or "", masks)
