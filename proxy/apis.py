"""The three APIs a scripted turn can be served through, side by side: how each one's request is
read, how a turn is written in it, where user messages are spliced in, what of the proxy's own
making is taken out before a conversation goes to the real model, and how an answer is read back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proxy.parse.anthropic import parse_anthropic
from proxy.parse.chat import parse_chat
from proxy.parse.responses import parse_responses
from proxy.reassemble import Assembled, anthropic_response, chat_response, responses_response
from proxy.render import anthropic, chat, responses
from proxy.replay.content import text_of
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
    reassemble: Callable[[bytes, bool], Assembled]


def _chat_stream(turn: Turn, conv: Conversation, body: dict[str, Any], key: str) -> list[bytes]:
    return chat.chat_stream(
        turn,
        model=conv.model,
        completion_id=f"chatcmpl-{key}",
        created=int(time.time()),
        include_usage=conv.include_usage,
    )


def _chat_whole(turn: Turn, conv: Conversation, body: dict[str, Any], key: str) -> bytes:
    return chat.chat_completion(
        turn, model=conv.model, completion_id=f"chatcmpl-{key}", created=int(time.time())
    )


def _splice_responses(items: list[Any], plan: tuple[Insertion, ...]) -> list[Any]:
    out = list(items)
    for insertion in sorted(plan, key=lambda i: i.position, reverse=True):
        out[insertion.position : insertion.position] = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text_of(u.content)}],
            }
            for u in insertion.users
        ]
    return out


def _splice_anthropic(messages: list[Any], plan: tuple[Insertion, ...]) -> list[Any]:
    """A user message right before the insertion point (tool results) takes the text as extra
    blocks, so that roles keep alternating; otherwise a new user message goes in."""
    out = list(messages)
    for insertion in sorted(plan, key=lambda i: i.position, reverse=True):
        texts = [{"type": "text", "text": text_of(u.content)} for u in insertion.users]
        at = insertion.position
        before = out[at - 1] if at > 0 else None
        if isinstance(before, dict) and before.get("role") == "user":
            content = before.get("content")
            blocks = (
                [{"type": "text", "text": content}]
                if isinstance(content, str)
                else list(content or [])
            )
            out[at - 1] = {**before, "content": [*blocks, *texts]}
        else:
            out[at:at] = [{"role": "user", "content": texts}]
    return out


def _clean_responses(items: list[Any]) -> list[Any] | None:
    """Reasoning items and item ids the proxy made up mean nothing to the real API."""
    changed = False
    out = []
    for item in items:
        if isinstance(item, dict):
            kind, ident = item.get("type"), item.get("id")
            own = isinstance(ident, str) and ident.startswith(responses.OWN_ID_PREFIXES)
            encrypted = item.get("encrypted_content")
            if kind in ("reasoning", "item_reference") and (
                own
                or (isinstance(encrypted, str) and encrypted.startswith(responses.REASONING_MARK))
            ):
                changed = True
                continue
            if own:
                item = {k: v for k, v in item.items() if k != "id"}
                changed = True
        out.append(item)
    return out if changed else None


def _clean_anthropic(messages: list[Any]) -> list[Any] | None:
    """Thinking blocks with the proxy's signature would be rejected by the real API."""
    changed = False
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and isinstance(content, list)
        ):
            kept = [
                b
                for b in content
                if not (
                    isinstance(b, dict)
                    and b.get("type") == "thinking"
                    and anthropic.is_own_signature(b.get("signature"))
                )
            ]
            if len(kept) != len(content):
                message = {**message, "content": kept}
                changed = True
        out.append(message)
    return out if changed else None


CHAT = Api(
    "chat", "messages", parse_chat, _chat_stream, _chat_whole, apply_chat, lambda _: None,
    lambda raw, stream: chat_response(raw, stream=stream),
)  # fmt: skip
RESPONSES = Api(
    "responses", "input", parse_responses,
    lambda turn, conv, body, key: responses.response_events(
        turn, body, key=key, created=int(time.time())
    ),
    lambda turn, conv, body, key: responses.response_object(
        turn, body, key=key, created=int(time.time())
    ),
    _splice_responses, _clean_responses, lambda raw, stream: responses_response(raw, stream=stream),
)  # fmt: skip
ANTHROPIC = Api(
    "anthropic", "messages", parse_anthropic,
    lambda turn, conv, body, key: anthropic.message_events(turn, body, key=key),
    lambda turn, conv, body, key: anthropic.message_object(turn, body, key=key),
    _splice_anthropic, _clean_anthropic, lambda raw, stream: anthropic_response(raw, stream=stream),
)  # fmt: skip
BY_NAME = {api.name: api for api in (CHAT, RESPONSES, ANTHROPIC)}
