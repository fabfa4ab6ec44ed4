"""The request core, with no sockets: what a completion request gets once its decision is made
(proxy.replay.engine decides; this says what the decision means for the answer), and the words
for where an answer came from. proxy.http turns ASGI into a request and an outcome into bytes.

    source.py    Source: where an answer came from (the x-replay-source header, the metrics'
                 source label, the request log, a recording's `source`)
    outcome.py   a decision (and the session's fault) -> an Outcome: an answer rendered, a fault's
                 error, a refusal, or the way live
    policy.py    what a request's handling reads (whether the harness's preset is looked for)
"""

from proxy.serving.outcome import Answer, FaultError, Live, Outcome, Refused, outcome
from proxy.serving.policy import reads_preset
from proxy.serving.source import Source

__all__ = [
    "Answer",
    "FaultError",
    "Live",
    "Outcome",
    "Refused",
    "Source",
    "outcome",
    "reads_preset",
]
