"""Requests real harnesses sent, captured on the wire (tests/fixtures/captures/<client>.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CAPTURES = Path(__file__).parents[1] / "fixtures" / "captures"


def captured(client: str) -> list[dict[str, Any]]:
    lines = (CAPTURES / f"{client}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def chat_calls(client: str) -> list[dict[str, Any]]:
    return [c for c in captured(client) if c["path"] == "/v1/chat/completions"]


def headers(capture: dict[str, Any]) -> dict[str, str]:
    return {k.lower(): v for k, v in capture["headers"].items()}
