"""The logs other harnesses and RL frameworks write, each read by a Reader (reader.py).

A reader takes a parsed file: one JSON document, or a JSONL file's (line index, value) pairs.
`miss` says whether the file is of its format (None), else a Misfit: why not, where, how close.
`convert` returns one or more Converted conversations of OpenAI chat messages, each message
remembering where in the file it came from, with notes on what it left out of the script.
A file of its format it cannot read is an error, loudly: a LoadError naming the file and the
line or item index, never a guess (one bad rollout of several is `refused`, the rest read).

    claude_code.py      Claude Code session transcripts (JSONL)
    codex.py            Codex CLI rollouts (JSONL)
    opencode.py         opencode session exports (`opencode export`)
    openhands.py        OpenHands event lists: the SDK's event store, V0 trajectories
    swe_agent.py        SWE-agent `.traj` files
    mini_swe_agent.py   mini-swe-agent `.traj.json` files
    nemo_gym.py         NeMo-Gym rollouts, one per JSONL line (READER), or one file (SINGLE)
    reader.py           the contract each of them fills: Reader, Misfit, Converted

READERS below is the table of them, in the order a file is tried against them (before the
generic shapes: proxy.formats.loading); a new harness log is a module and a row.
"""

from __future__ import annotations

from proxy.formats.harness_logs import (
    claude_code,
    codex,
    mini_swe_agent,
    nemo_gym,
    opencode,
    openhands,
    swe_agent,
)
from proxy.formats.harness_logs.reader import Converted, Lines, Misfit, Opened, Reader, Script

# the harnesses' own logs: tried in this order, before the generic shapes
READERS: tuple[Reader, ...] = (
    claude_code.READER,
    codex.READER,
    opencode.READER,
    openhands.READER,
    swe_agent.READER,
    mini_swe_agent.READER,
    nemo_gym.READER,
    nemo_gym.SINGLE,  # a rollout file of one line parses as one JSON document
)

__all__ = [
    "READERS",
    "Converted",
    "Lines",
    "Misfit",
    "Opened",
    "Reader",
    "Script",
    "claude_code",
    "codex",
    "mini_swe_agent",
    "nemo_gym",
    "opencode",
    "openhands",
    "swe_agent",
]
