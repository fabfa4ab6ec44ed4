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

Which reader a file gets, and in what order they are tried, is proxy.formats.loading's.
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
from proxy.formats.harness_logs.reader import Converted, Lines, Misfit, Reader

__all__ = [
    "Converted",
    "Lines",
    "Misfit",
    "Reader",
    "claude_code",
    "codex",
    "mini_swe_agent",
    "nemo_gym",
    "opencode",
    "openhands",
    "swe_agent",
]
