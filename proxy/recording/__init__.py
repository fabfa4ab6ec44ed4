"""Recording: what went through the proxy, written down, and two runs compared.

    tap.py       what the recorder and the dumper learn from one exchange, once it completes
    recorder.py  --record-dir: every exchange appended to <session>.jsonl
    dumper.py    --dump-dir: each live completion as one JSON file, for training pipelines
    diff.py      `replay-proxy diff A B`: two trajectories or recordings, step by step

Reading a recording back as a trajectory is proxy.formats.recording's.
"""
