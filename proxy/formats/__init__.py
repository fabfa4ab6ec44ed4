"""Trajectory files, in every format they come in, into the one model (proxy.replay.trajectory).

    loading.py      load_file and the rest: which format a file is, told apart by its shape
    generic.py      the generic shapes (chat lists, API request objects, JSONL), each a reader
    chat.py         OpenAI chat messages -> Trajectory, by the script rules every format goes through
                    (a file in another API's shape is first turned into chat messages by that
                    API's proxy.apis.*_history)
    answer.py       an assistant message as the script keeps it: text, calls, time, usage
    recording.py    what --record-dir writes, read back as a script of recorded answers
    convert.py      a trajectory written back as chat JSON (`replay-proxy convert`)
    rollout.py      a trajectory as one NeMo-Gym rollout line (`convert --to nemo-gym`)
    children.py     the subagents a run spawned, from the transcripts kept beside its log
    harness_logs/   the logs other harnesses and RL frameworks write, a reader each

This package hands on the names callers load with; the work is in its modules.
"""

from __future__ import annotations

from proxy.errors import LoadError
from proxy.formats.loading import (
    LEFT_OUT,
    load_all,
    load_bytes,
    load_file,
    load_many,
    read_with,
    trajectory_name,
)

__all__ = [
    "LEFT_OUT",
    "LoadError",
    "load_all",
    "load_bytes",
    "load_file",
    "load_many",
    "read_with",
    "trajectory_name",
]
