"""Anthropic's models on Google Vertex AI (POST /v1/projects/{project}/locations/{region}/
publishers/anthropic/models/{model}:rawPredict, and :streamRawPredict for a stream): the Anthropic
Messages API with the model in the URL, not the body, and `anthropic_version: vertex-2023-10-16`
in it; answered as the Messages API answers (SSE for a stream). Claude Code sends this with
CLAUDE_CODE_USE_VERTEX and ANTHROPIC_VERTEX_BASE_URL (the proxy's root followed by /v1).

The rest is Anthropic's: its module reads and writes the bodies.
"""

from __future__ import annotations

from proxy.replay.conversation import Conversation

PUBLISHER = "/publishers/anthropic/models/"
RAW, STREAM = ":rawPredict", ":streamRawPredict"
COUNT = "count-tokens"  # .../models/count-tokens:rawPredict counts a body's tokens: no answer


def model_of(path: str) -> str:
    return path.rsplit(PUBLISHER, 1)[-1].rsplit(":", 1)[0]


def serves(path: str) -> bool:
    """A completion on an Anthropic model of Vertex AI."""
    return PUBLISHER in path and path.endswith((RAW, STREAM)) and model_of(path) != COUNT


def claims(path: str) -> bool:
    """Vertex AI's other requests on Anthropic's models (counting tokens), forwarded as its own."""
    return PUBLISHER in path


def target(conv: Conversation, path: str, query: str) -> None:
    """The model and the streaming, from the URL."""
    conv.model = model_of(path)
    conv.stream = path.endswith(STREAM)
