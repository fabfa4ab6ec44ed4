"""The commands besides `serve` (proxy.serve), each in a module of its own; proxy.cli parses the
command line and hands each its flags.

    check.py     `check FILE...`: what each trajectory file will replay
    convert.py   `convert FILE... -o OUT`: chat JSON, or NeMo-Gym rollout lines
    diff.py      `diff A B` and `masks suggest A B`
    health.py    `health`: the container probe, standard library only
"""
