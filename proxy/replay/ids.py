"""Ids the proxy shows clients: tool-call ids as each API needs them, and deterministic item ids.

A recorded tool-call id is served exactly, so the harness echoes it back and the turn is found
again. Anthropic accepts tool_use ids of letters, digits, _ and - only; any other recorded id gets a
stable stand-in there, and the engine compares what comes back with that same stand-in.
"""

from __future__ import annotations

import hashlib
import re

_ANTHROPIC_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")


def wire_id(api: str, call_id: str) -> str:
    if api == "anthropic" and not _ANTHROPIC_ID.fullmatch(call_id):
        return "toolu_" + hashlib.sha256(call_id.encode()).hexdigest()[:24]
    return call_id


def derived(prefix: str, *parts: object, length: int = 32) -> str:
    """prefix + hex digest of the parts: the same turn always gets the same ids."""
    text = "\x00".join(str(p) for p in parts)
    return prefix + hashlib.sha256(text.encode()).hexdigest()[:length]
