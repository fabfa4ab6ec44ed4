"""Where an answer came from: one vocabulary for the x-replay-source header, the metrics' source
label, the request log, a recording's `source` field and the status page's timeline."""

from __future__ import annotations

from enum import StrEnum


class Source(StrEnum):
    SCRIPTED = "scripted"  # a scripted turn
    STOP = "stop"  # the final text turn of --after-script stop
    FAULT = "fault"  # a fault injected at a scripted turn (an error, or the turn cut)
    UPSTREAM = "upstream"  # forwarded to the real model
    # a side or subagent call answered from a recording (strict mode, or before a hand-off);
    # a recording's own line says STRICT for it, as it always has
    RECORDED = "recorded"
    STRICT = "strict"
    DIVERGED = "diverged"  # refused: its history (or request) left the script
    ERROR = "error"  # an error the proxy made (a bad request, no upstream, ...)
    REFUSED = "refused"  # in a session's timeline: strict replay or the fence kept it back
    ADMIN = "admin"  # a recording's line for a script set through the admin API
