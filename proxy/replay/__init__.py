"""The replay core: pure, no I/O, tested step by step.

trajectory.py    the one model of a saved run: turns, tool calls, what was skipped and why
conversation.py  what the engine knows of an incoming request, whatever API it came through
engine.py        decide(): which turn is due, a divergence, or going live
text_based.py    scripts of harnesses that call tools through text: which tool-less request is theirs
faults.py        faults injected at a scripted turn: specs, and which one a request gets
splice.py        the trajectory's later user messages, put into live requests where they stood
strict.py        strict replay: a request compared with the recorded one, a miss explained
restore.py       the restore verdict: whether a resumed session's tool results came back as recorded
normalize.py     what may differ between two runs (ids, argument JSON, masks) made equal
presets.py       per harness, what changes between two of its runs, and how it is recognised
volatile.py      a divergence's verdict: only values that change between runs differ, or changed
difference.py    the first difference of two JSON values, as a path and the text around it
content.py       message content in its shapes, and reasoning hidden in text
ids.py           the ids clients see: tool-call ids per API, deterministic item ids
"""
