"""The Gemini API (POST /v1beta/models/{model}:generateContent and :streamGenerateContent): a
request body read into a Conversation, a scripted turn written as a GenerateContentResponse or its
stream, user messages spliced into `contents`, and an answer read back.

The model and the streaming come from the URL, not the body (`target`). `model` contents are the
replies (functionCall parts are the calls, matched by `id` when the request carries ids; an
id-less call gets a stand-in id naming its place, and the engine matches it by its name, in
order); functionResponse parts of `user` contents are the results (an id-less one answers the
oldest unanswered call of its name, and takes its id or stand-in); the text parts of user
contents are user text; `systemInstruction` is the system prompt. `tools[].functionDeclarations`
are the tools offered; `toolConfig.functionCallingConfig.mode: NONE` offers none.

A turn is one candidate: a thought part (`"thought": true`) when the request asks for thoughts
(`generationConfig.thinkingConfig.includeThoughts`), a text part, one functionCall part per call
(the recorded id, the arguments as an object), finishReason STOP, usageMetadata zeroed. Streamed
(`alt=sse`) it is one `data:` event per part, the last with finishReason and usageMetadata; without
`alt=sse` the same chunks go as one JSON array.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.apis.gemini_history import contents_to_chat, parts_text, response_text
from proxy.apis.idless import Unanswered
from proxy.apis.readback import Assembled, arguments_object, event_data, sse_events
from proxy.apis.request import malformed, spliced, tool_names
from proxy.errors import BadRequest
from proxy.replay.content import text_of
from proxy.replay.conversation import NO_ID, Call, Conversation, Reply, Result, fold_greeting
from proxy.replay.splice import Insertion
from proxy.replay.trajectory import Turn
from proxy.replay.usage import NO_USAGE

GENERATE = ":generateContent"
STREAM = ":streamGenerateContent"

# ---- the request


def is_gemini_path(path: str) -> bool:
    """/v1beta/models/{model}:generateContent and :streamGenerateContent (any version prefix)."""
    return "/models/" in path and path.endswith((GENERATE, STREAM))


# the Gemini API's methods on a model (the path ends in one): its version stays in the path
METHODS = (GENERATE, STREAM, ":countTokens", ":embedContent")


def claims(path: str) -> bool:
    """A Gemini API request, forwarded as one: under /v1beta or /v1alpha, or a method on a model
    (/v1/models/{model}:countTokens)."""
    return path.startswith(("/v1beta/", "/v1alpha/")) or path.endswith(METHODS)


def target(conv: Conversation, path: str, query: str) -> None:
    """The model and the kind of answer, from the URL."""
    name = path.rsplit("/models/", 1)[-1]
    conv.model = name.rsplit(":", 1)[0]
    if path.endswith(STREAM):
        sse = "alt=sse" in query.split("&")
        conv.stream, conv.array = sse, not sse


def parse_gemini(body: Any) -> Conversation:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    contents = body.get("contents")
    if not isinstance(contents, list):
        raise BadRequest("'contents' must be an array", param="contents")
    config = body.get("toolConfig")
    calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
    conv = Conversation(  # positional: keyword arguments cost as much as the rest of __init__
        "gemini",
        "",  # model: from the URL (target)
        False,  # stream: from the URL
        False,  # include_usage
        tool_names(body.get("tools")),
        isinstance(calling, dict) and calling.get("mode") == "NONE",  # tool_choice_none
        len(contents),  # message_count
    )
    system = body.get("systemInstruction")
    if isinstance(system, dict):
        conv.system = parts_text(system.get("parts"))
    elif isinstance(system, str):
        conv.system = system
    unanswered = Unanswered()
    for pos, content in enumerate(contents):
        path = ("contents", pos)
        if not isinstance(content, dict):
            raise malformed(path, "must be an object")
        parts = content.get("parts")
        if not isinstance(parts, list):
            raise malformed((*path, "parts"), "must be an array")
        if content.get("role") == "model":
            reply = Reply(pos, path, parts_text(parts), [], (*path, "parts"), pos)
            for k, part in enumerate(parts):
                call = part.get("functionCall") if isinstance(part, dict) else None
                if isinstance(call, dict):
                    ident, name = call.get("id"), call.get("name")
                    # an id-less call: a stand-in naming its place, which its response gets too
                    ident = ident if isinstance(ident, str) and ident else f"{NO_ID}{pos}.{k}"
                    name = name if isinstance(name, str) else ""
                    at = (*path, "parts", k, "functionCall")
                    reply.calls.append(Call(ident, name, "", (*at, "id"), (*at, "name")))
                    unanswered.add(name, ident)
            if reply.calls or reply.text.strip():
                conv.replies.append(reply)
            continue
        texts = []
        for k, part in enumerate(parts):
            if not isinstance(part, dict):
                continue
            response = part.get("functionResponse")
            if isinstance(response, dict):
                output: Any = response.get("response")
                text = response_text(output)
                where = (*path, "parts", k, "functionResponse", "response")
                conv.results.append(Result(pos, where, unanswered.answer(response), text))
            elif isinstance(part.get("text"), str) and not part.get("thought"):
                texts.append(part["text"])
        if texts:
            text = "\n".join(texts)
            conv.users[pos] = text
            if conv.task is None:
                conv.task = text
    return fold_greeting(conv)


# ---- the answer


def _thoughts_wanted(request: dict[str, Any]) -> bool:
    config = request.get("generationConfig")
    thinking = config.get("thinkingConfig") if isinstance(config, dict) else None
    if not isinstance(thinking, dict):
        return False
    # the API takes the proto field names too, as the Python SDK sends them
    return thinking.get("includeThoughts", thinking.get("include_thoughts")) is True


def parts(turn: Turn, request: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if turn.reasoning and _thoughts_wanted(request):
        out.append({"text": turn.reasoning, "thought": True})
    if turn.text:
        out.append({"text": turn.text})
    for i, call in enumerate(turn.tool_calls):
        out.append(
            {
                "functionCall": {
                    "id": call.id,
                    "name": call.name,
                    "args": arguments_object(
                        turn, i, "the Gemini API takes only objects as functionCall args"
                    ),
                },
                **call.served_with("gemini"),  # as recorded: its thoughtSignature
            }
        )
    return out


def usage_metadata(turn: Turn) -> dict[str, Any]:
    """Gemini counts thoughts apart from the candidates' tokens."""
    u = turn.usage or NO_USAGE
    out = {
        "promptTokenCount": u.input,
        "candidatesTokenCount": u.output - u.reasoning,
        "totalTokenCount": u.input + u.output,
    }
    if u.cached:
        out["cachedContentTokenCount"] = u.cached
    if u.reasoning:
        out["thoughtsTokenCount"] = u.reasoning
    return out


def _chunk(
    content: list[dict[str, Any]], model: str, key: str, last: Turn | None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": content}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate]}
    if last is not None:
        candidate["finishReason"] = "STOP"
        chunk["usageMetadata"] = usage_metadata(last)
    chunk["modelVersion"] = model or "replay"
    chunk["responseId"] = key
    return chunk


def response_object(turn: Turn, conv: Conversation, request: dict[str, Any], key: str) -> bytes:
    if conv.array:
        return orjson.dumps(_chunks(turn, conv, request, key))
    return orjson.dumps(_chunk(parts(turn, request), conv.model, key, turn))


def response_events(
    turn: Turn, conv: Conversation, request: dict[str, Any], key: str
) -> list[bytes]:
    return [b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in _chunks(turn, conv, request, key)]


def _chunks(
    turn: Turn, conv: Conversation, request: dict[str, Any], key: str
) -> list[dict[str, Any]]:
    """One chunk per part, the last one carrying finishReason and usageMetadata."""
    content = parts(turn, request) or [{"text": ""}]
    last = len(content) - 1
    return [
        _chunk([part], conv.model, key, turn if i == last else None)
        for i, part in enumerate(content)
    ]


# ---- on the way upstream


def splice(contents: list[Any], plan: tuple[Insertion, ...]) -> list[Any]:
    """A user content right before the insertion point (function responses) takes the text as
    extra parts, so that roles keep alternating; otherwise a new user content goes in."""

    def put(out: list[Any], group: list[Insertion]) -> None:
        before = out[-1] if out else None
        if isinstance(before, dict) and before.get("role") == "user":
            for insertion in group:
                out[-1] = {**out[-1], "parts": [*(out[-1].get("parts") or []), *_texts(insertion)]}
        else:
            for insertion in reversed(group):  # of two at one place, the later one goes first
                out.append({"role": "user", "parts": _texts(insertion)})

    return spliced(contents, plan, put)


def _texts(insertion: Insertion) -> list[dict[str, Any]]:
    return [{"text": text_of(u.content)} for u in insertion.users]


# ---- an answer read back


_TEXT_KEYS = frozenset(("text", "thought", "thoughtSignature"))


def _continues(last: Any, part: Any) -> bool:
    """Whether a stream chunk's first part goes on with the text (or thought) before it."""
    return (
        isinstance(last, dict)
        and isinstance(part, dict)
        and isinstance(last.get("text"), str)
        and isinstance(part.get("text"), str)
        and last.keys() <= _TEXT_KEYS
        and part.keys() <= _TEXT_KEYS
        and bool(last.get("thought")) == bool(part.get("thought"))
    )


def read_answer(raw: bytes, *, stream: bool) -> Assembled:
    """The chunks put together (a stream's, or a JSON array's), and the turn in chat form."""
    events = sse_events(raw) if stream else None
    try:
        if events is not None:
            chunks = [orjson.loads(d) for e in events if (d := event_data(e))]
        else:
            loaded = orjson.loads(raw)
            chunks = loaded if isinstance(loaded, list) else [loaded]
        merged: list[Any] = []
        finish = usage = None
        for chunk in chunks:
            candidate = chunk["candidates"][0] if chunk.get("candidates") else {}
            parts = (candidate.get("content") or {}).get("parts") or []
            if events is not None and parts and merged and _continues(merged[-1], parts[0]):
                # a streamed text arrives in pieces, one chunk each: the SDKs join them as is
                merged[-1] = {
                    **merged[-1],
                    **parts[0],
                    "text": merged[-1]["text"] + parts[0]["text"],
                }
                parts = parts[1:]
            merged.extend(parts)
            finish = candidate.get("finishReason") or finish
            usage = chunk.get("usageMetadata") or usage
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
        return Assembled(None, None, None, events)
    if not chunks:
        return Assembled(None, None, None, events)
    native = {
        **chunks[-1],
        "candidates": [
            {"content": {"role": "model", "parts": merged}, "finishReason": finish, "index": 0}
        ],
    }
    chat, _ = contents_to_chat([{"role": "model", "parts": merged}], "response")
    return Assembled(chat[0], finish, usage, events, native=native)


# ---- errors

_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    508: "INTERNAL",
}


def error_body(body: dict[str, Any], status: int) -> dict[str, Any]:
    """An OpenAI-shaped error in Google's shape: {"error": {"code", "message", "status"}} (and the
    proxy's own "replay" details, if any)."""
    inner = body["error"]
    google = {
        "code": status,
        "message": inner["message"],
        "status": _STATUSES.get(status, "UNKNOWN"),
    }
    return {"error": {**google, **({"replay": inner["replay"]} if "replay" in inner else {})}}
