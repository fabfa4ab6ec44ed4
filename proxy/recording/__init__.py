"""Recording: what went through the proxy, written down, and two runs compared.

    tap.py       what the recorder, the dumper and the tracer learn from one exchange, once it completes
    tracer.py    OpenTelemetry: one span per completion, exported when the OTEL_* variables ask
    recorder.py  --record-dir: every exchange appended to <session>.jsonl, one run a file
    dumper.py    --dump-dir: each live completion as one JSON file, for training pipelines
    diff.py      `replay-proxy diff A B`: two trajectories or recordings, step by step, with verdicts
    suggest.py   `replay-proxy masks suggest A B`: the masks that make two runs agree

Reading a recording back as a trajectory is proxy.formats.recording's.
"""
