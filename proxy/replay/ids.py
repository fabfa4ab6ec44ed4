"""Ids the proxy shows clients: recorded tool-call ids, and deterministic item ids.

A recorded tool-call id is served exactly, so the harness echoes it back and the turn is found
again. An API that cannot take every recorded id (Anthropic's) gives its parser a rule of its own
(Conversation.wire_id), and the engine compares what comes back with what that rule made.
"""

from __future__ import annotations

import hashlib


def as_recorded(call_id: str) -> str:
    """The id a client is shown for a recorded call: the recorded one, where the API takes it."""
    return call_id


def derived(prefix: str, *parts: object, length: int = 32) -> str:
    """prefix + hex digest of the parts: the same turn always gets the same ids."""
    text = "\x00".join(str(p) for p in parts)
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:length]
