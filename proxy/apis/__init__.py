"""The four APIs a scripted turn can be served through, side by side: how each one's request is
read, how a turn is written in it, where user messages are spliced in, what of the proxy's own
making is taken out before a conversation goes to the real model, and how an answer is read back.

    chat.py        OpenAI Chat Completions (/v1/chat/completions)
    responses.py   OpenAI Responses (/v1/responses)
    anthropic.py   Anthropic Messages (/v1/messages)
    gemini.py      Gemini (/v1beta/models/{model}:generateContent, :streamGenerateContent)
    readback.py    an answer read back from the wire (recordings, dumps), SSE split into events
    request.py     what every request body must have before the decision reads it

Each API module is pure: a body in, a Conversation out; a Turn in, bytes out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proxy.apis import anthropic, chat, gemini, responses
from proxy.apis.readback import Assembled
from proxy.replay.conversation import Conversation
from proxy.replay.splice import Insertion, apply_chat
from proxy.replay.trajectory import Turn


@dataclass(frozen=True, slots=True)
class Api:
    name: str  # chat | responses | anthropic
    history: str  # the body field holding the conversation
    parse: Callable[[Any], Conversation]
    stream: Callable[[Turn, Conversation, dict[str, Any], str], list[bytes]]
    whole: Callable[[Turn, Conversation, dict[str, Any], str], bytes]
    splice: Callable[[list[Any], tuple[Insertion, ...]], list[Any]]
    clean: Callable[[list[Any]], list[Any] | None]  # None: nothing to take out
    read_answer: Callable[[bytes, bool], Assembled]
    # what the URL says about the request (Gemini: the model and the streaming), if anything
    target: Callable[[Conversation, str, str], None] | None = None


def created(turn: Turn) -> int:
    """When the turn was answered: as the file says, else (a turn made up in a test) now."""
    return turn.created or int(time.time())


def _chat_stream(turn: Turn, conv: Conversation, body: dict[str, Any], key: str) -> list[bytes]:
    return chat.chat_stream(
        turn,
        model=conv.model,
        completion_id=f"chatcmpl-{key}",
        created=created(turn),
        include_usage=conv.include_usage,
    )


def _chat_whole(turn: Turn, conv: Conversation, body: dict[str, Any], key: str) -> bytes:
    return chat.chat_completion(
        turn, model=conv.model, completion_id=f"chatcmpl-{key}", created=created(turn)
    )


CHAT = Api(
    "chat", "messages", chat.parse_chat, _chat_stream, _chat_whole, apply_chat, lambda _: None,
    lambda raw, stream: chat.read_answer(raw, stream=stream),
)  # fmt: skip
RESPONSES = Api(
    "responses", "input", responses.parse_responses,
    lambda turn, conv, body, key: responses.response_events(
        turn, body, key=key, created=created(turn)
    ),
    lambda turn, conv, body, key: responses.response_object(
        turn, body, key=key, created=created(turn)
    ),
    responses.splice, responses.clean, lambda raw, stream: responses.read_answer(raw, stream=stream),
)  # fmt: skip
ANTHROPIC = Api(
    "anthropic", "messages", anthropic.parse_anthropic,
    lambda turn, conv, body, key: anthropic.message_events(turn, body, key=key),
    lambda turn, conv, body, key: anthropic.message_object(turn, body, key=key),
    anthropic.splice, anthropic.clean, lambda raw, stream: anthropic.read_answer(raw, stream=stream),
)  # fmt: skip
GEMINI = Api(
    "gemini", "contents", gemini.parse_gemini,
    lambda turn, conv, body, key: gemini.response_events(turn, conv, body, key),
    lambda turn, conv, body, key: gemini.response_object(turn, conv, body, key),
    gemini.splice, lambda _: None, lambda raw, stream: gemini.read_answer(raw, stream=stream),
    gemini.target,
)  # fmt: skip
BY_NAME = {api.name: api for api in (CHAT, RESPONSES, ANTHROPIC, GEMINI)}
