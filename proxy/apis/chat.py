"""The OpenAI Chat Completions API (/v1/chat/completions): a request body read into a
Conversation, a scripted turn written as a chat.completion or its chunk stream, and an answer read
back for recordings and dumps.

Only what the decision reads is checked in a request; everything else is left for the upstream,
and type errors in what is read are a BadRequest naming the JSON path. Stream order (opencode's
parser needs id, type and function.name on the first chunk of each tool call): role, reasoning,
content, one delta per tool call with its full arguments, the finish chunk, a usage chunk if asked
for, [DONE]. A turn's recorded tokens (proxy.replay.tokens) are served where the recording had them:
NeMo-Gym's on the message (a stream's finish delta), vLLM's `prompt_token_ids` on the body (a
stream's first chunk) and `token_ids` on the choice, OpenAI's `logprobs` on the choice (a stream's
finish chunk); an answer read back keeps them on its message, in the same fields.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.apis.readback import Assembled, event_data, sse_events
from proxy.apis.request import malformed, opened, tool_names
from proxy.errors import BadRequest
from proxy.replay.content import is_content, text_of
from proxy.replay.conversation import Call, Conversation, Reply, Result, fold_greeting
from proxy.replay.tokens import FIELDS, LOGPROBS, PROMPT, VLLM_GENERATION, Tokens
from proxy.replay.trajectory import Turn, Usage
from proxy.replay.usage import NO_USAGE, nested, token_count

# ---- the request


def parse_chat(body: Any) -> Conversation:
    messages, model = opened(body, "messages")
    if not isinstance(messages, list):
        raise BadRequest("'messages' must be an array", param="messages")
    options = body.get("stream_options")
    conv = Conversation(  # positional: keyword arguments cost as much as the rest of __init__
        "chat",
        model,
        body.get("stream") is True,
        isinstance(options, dict) and options.get("include_usage") is True,  # include_usage
        tool_names(_tools(body)),
        body.get("tool_choice") == "none",  # tool_choice_none
        len(messages),  # message_count
    )
    systems: list[str] = []
    replies, results, users = conv.replies, conv.results, conv.users
    # the per-message work is what a long history costs: paths stay tuples, plain strings skip
    # text_of, and nothing is built for a message the decision does not read
    for pos, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise malformed(("messages", pos), "must be an object")
        role = msg.get("role")
        content = msg.get("content")
        if not isinstance(role, str):
            raise malformed(("messages", pos, "role"), "is missing")
        text = content if isinstance(content, str) else _text(pos, content)
        if role == "assistant":
            raw = msg.get("tool_calls")
            calls = _calls(pos, raw) if raw is not None else []
            if calls or text.strip():
                path = ("messages", pos)
                replies.append(Reply(pos, path, text, calls, (*path, "tool_calls"), pos))
        elif role == "tool":
            call_id = msg.get("tool_call_id")
            if isinstance(call_id, str):
                results.append(Result(pos, ("messages", pos, "content"), call_id, text))
        elif role == "user":
            users[pos] = text
            if conv.task is None:
                conv.task = text
        elif role in ("system", "developer") and conv.task is None:
            systems.append(text)
    conv.system = "\n".join(systems)
    return fold_greeting(conv)


def marks(item: dict[str, Any]) -> bool:
    """An item of a bare list (a trajectory file) that only chat messages hold: tool calls, or a
    tool result."""
    return "tool_calls" in item or item.get("role") == "tool"


def _tools(body: dict[str, Any]) -> Any:
    tools = body.get("tools")
    return tools if tools is not None else body.get("functions")  # the legacy form


def _text(pos: int, content: Any) -> str:
    if not is_content(content):
        raise malformed(("messages", pos, "content"), "must be a string, an array of parts or null")
    return text_of(content)


def _calls(pos: int, raw: Any) -> list[Call]:
    if not isinstance(raw, list):
        raise malformed(("messages", pos, "tool_calls"), "must be an array")
    calls: list[Call] = []
    for j, call in enumerate(raw):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            raise malformed(("messages", pos, "tool_calls", j, "function"), "must be an object")
        call_id, name, args = call.get("id"), fn.get("name"), fn.get("arguments")
        calls.append(
            Call(
                call_id if isinstance(call_id, str) else "",
                name if isinstance(name, str) else "",
                args if isinstance(args, str) else "",
                ("messages", pos, "tool_calls", j, "id"),
                ("messages", pos, "tool_calls", j, "function", "name"),
            )
        )
    return calls


# ---- the answer


def read_usage(value: dict[str, Any]) -> Usage | None:
    """A Chat Completions usage (prompt and completion tokens, with their details); None when
    `value` is not one."""
    if "prompt_tokens" not in value and "completion_tokens" not in value:
        return None
    return Usage(
        token_count(value.get("prompt_tokens")),
        token_count(value.get("completion_tokens")),
        token_count(nested(value, "prompt_tokens_details", "cached_tokens")),
        0,
        token_count(nested(value, "completion_tokens_details", "reasoning_tokens")),
    )


def chat_usage(turn: Turn) -> dict[str, Any]:
    """The turn's usage (proxy.replay.usage: as recorded, else estimated) as Chat writes it."""
    u = turn.usage or NO_USAGE
    return {
        "prompt_tokens": u.input,
        "completion_tokens": u.output,
        "total_tokens": u.input + u.output,
        "prompt_tokens_details": {"cached_tokens": u.cached},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning},
    }


def finish_reason(turn: Turn) -> str:
    return "stop" if turn.final else "tool_calls"


def _served_calls(turn: Turn) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in turn.tool_calls
    ]


def chat_message(turn: Turn, *, tokens: bool = True) -> dict[str, Any]:
    """The turn as a chat-form assistant message, with its recorded token fields in the
    recording's own family (proxy.replay.tokens) unless `tokens` is false."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.reasoning:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = _served_calls(turn)
    if tokens and turn.tokens is not None:
        message.update(turn.tokens.message_fields())
    return message


def _on_message(tokens: Tokens | None) -> bool:
    """Whether a served answer carries the tokens on its message (NeMo-Gym's Chat Completions
    does), rather than on its choice and body (vLLM's, OpenAI's logprobs)."""
    return tokens is not None and tokens.style == "nemo-gym"


def _vllm_prompt(tokens: Tokens | None) -> dict[str, Any]:
    """vLLM's `prompt_token_ids`, which it puts on the body (a stream: its first chunk)."""
    if tokens is None or tokens.style != "vllm" or tokens.prompt is None:
        return {}
    return {PROMPT: tokens.prompt}


def _choice_tokens(tokens: Tokens | None, choice: dict[str, Any], last: bool) -> None:
    """vLLM's `token_ids` and OpenAI's `logprobs` on a choice (of a stream: its last chunk)."""
    if tokens is None or not last:
        return
    if tokens.style == "vllm":
        choice[VLLM_GENERATION] = tokens.generation
    if tokens.entries is not None:
        choice["logprobs"] = {"content": tokens.entries, "refusal": None}


def chat_completion(turn: Turn, *, model: str, completion_id: str, created: int) -> bytes:
    tokens = turn.tokens
    message = chat_message(turn, tokens=False)
    if tokens is not None and _on_message(tokens):
        message.update(tokens.nemo_gym())  # as NeMo-Gym's Chat Completions message holds them
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": finish_reason(turn),
        "logprobs": None,
    }
    _choice_tokens(tokens, choice, True)
    body = {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": chat_usage(turn),
        **_vllm_prompt(tokens),
    }
    return orjson.dumps(body)


def chat_stream(
    turn: Turn, *, model: str, completion_id: str, created: int, include_usage: bool
) -> list[bytes]:
    """The SSE events, one bytes object each."""
    head = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
    }

    tokens = turn.tokens

    def event(delta: dict[str, Any], finish: str | None = None, **top: Any) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        _choice_tokens(tokens, choice, finish is not None)
        return b"data: " + orjson.dumps({**head, **top, "choices": [choice]}) + b"\n\n"

    events = [event({"role": "assistant"}, **_vllm_prompt(tokens))]
    if turn.reasoning:
        events.append(event({"reasoning_content": turn.reasoning}))
    if turn.text:
        events.append(event({"content": turn.text}))
    for i, call in enumerate(_served_calls(turn)):
        events.append(event({"tool_calls": [{"index": i, **call}]}))
    # NeMo-Gym's fields go on the message; a stream's last delta completes it
    last = tokens.nemo_gym() if tokens is not None and _on_message(tokens) else {}
    events.append(event(last, finish_reason(turn)))
    if include_usage:
        usage = {**head, "choices": [], "usage": chat_usage(turn)}
        events.append(b"data: " + orjson.dumps(usage) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


# ---- an answer read back


def read_answer(raw: bytes, *, stream: bool) -> Assembled:
    if not stream:
        try:
            body = orjson.loads(raw)
            choice = body["choices"][0]
            said = choice.get("message")
            if isinstance(said, dict):
                said = _with_tokens(said, body.get(PROMPT), choice)
            return Assembled(said, choice.get("finish_reason"), body.get("usage"), None)
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            return Assembled(None, None, None, None)
    events = sse_events(raw)
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    # per call: its name and arguments deltas, joined once the stream is read (a string added to
    # per delta is quadratic: a long call's arguments come in thousands of them)
    pieces: dict[int, tuple[list[str], list[str]]] = {}
    finish: str | None = None
    usage: Any = None
    head: dict[str, Any] | None = None
    prompt: Any = None  # the token fields, as vLLM and NeMo-Gym stream them
    generated: list[Any] = []
    entries: list[Any] = []
    nemo_gym: dict[str, Any] = {}
    for block in events:
        data = event_data(block)
        if data is None or data == "[DONE]":
            continue
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(chunk, dict):
            continue
        if head is None:
            head = {k: chunk.get(k) for k in ("id", "created", "model")}
        usage = chunk.get("usage") or usage
        prompt = chunk.get(PROMPT) if prompt is None else prompt
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            prompt = choice.get(PROMPT) if prompt is None else prompt
            if isinstance(ids := choice.get(VLLM_GENERATION), list):
                generated.extend(ids)
            logprobs = choice.get(LOGPROBS)
            if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
                entries.extend(logprobs["content"])
            nemo_gym.update((k, v) for k, v in delta.items() if k in FIELDS)
            content.append(delta.get("content") or "")
            reasoning.append(delta.get("reasoning_content") or delta.get("reasoning") or "")
            for part in delta.get("tool_calls") or []:
                key = part.get("index", len(calls))
                entry = calls.setdefault(
                    key,
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                names, arguments = pieces.setdefault(key, ([], []))
                entry["id"] = part.get("id") or entry["id"]
                fn = part.get("function") or {}
                names.append(_piece(fn.get("name") or ""))
                arguments.append(_piece(fn.get("arguments") or ""))
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(content) or None}
    if any(reasoning):
        message["reasoning_content"] = "".join(reasoning)
    for key, (names, arguments) in pieces.items():
        calls[key]["function"]["name"] = "".join(names)
        calls[key]["function"]["arguments"] = "".join(arguments)
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    message.update(nemo_gym)
    if generated or prompt is not None:
        message[PROMPT], message[VLLM_GENERATION] = prompt, generated
    if entries:
        message[LOGPROBS] = {"content": entries}
    return Assembled(message, finish, usage, events, head)


def _with_tokens(message: dict[str, Any], prompt: Any, choice: dict[str, Any]) -> dict[str, Any]:
    """A JSON answer's message with vLLM's token ids and OpenAI's logprobs, which the answer
    holds beside it, put on it (a copy: the answer itself is recorded as it came)."""
    ids, logprobs = choice.get(VLLM_GENERATION), choice.get(LOGPROBS)
    entries = isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list)
    if not isinstance(ids, list) and not entries:
        return message
    message = dict(message)
    if isinstance(ids, list):
        message[PROMPT], message[VLLM_GENERATION] = prompt, ids
    if entries:
        message[LOGPROBS] = logprobs
    return message


def _piece(piece: Any) -> str:
    """A delta of a call's name or arguments, which must be text, as adding it to one required."""
    if not isinstance(piece, str):
        raise TypeError(f'can only concatenate str (not "{type(piece).__name__}") to str')
    return piece
