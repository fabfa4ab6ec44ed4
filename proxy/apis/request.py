"""What every API's request body must have before the decision reads it: one rule, three APIs."""

from __future__ import annotations

from typing import Any

from proxy.errors import BadRequest


def opened(body: Any, history: str) -> tuple[Any, str]:
    """The body's history field (`messages` or `input`: present, its type is the API's to check)
    and its model (a string, "" when absent)."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    items = body.get(history)
    if items is None:
        raise BadRequest(f"'{history}' is a required property", param=history)
    model = body.get("model", "")
    if not isinstance(model, str):
        raise BadRequest("'model' must be a string", param="model")
    return items, model
