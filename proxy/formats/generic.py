"""The generic shapes a trajectory file may take, each a Reader under the same contract as the
harness logs (harness_logs/reader.py), tried after them, in the order of GENERIC:

- "chat" (or an API's name): a bare JSON array of chat messages, or of another API's messages
  (Responses items, Anthropic messages: told apart by the first item only that API writes);
- an object shaped like an API's request ({"input": [...], "instructions"}, {"messages": [...],
  "system"}, Gemini's {"contents": [...]}), each API's by its Api row's FileShape;
- "jsonl": a single chat message (a JSONL file of one line);
- "messages": {"messages": [...]};
- "llm_completions": {"messages": [...], "response": {chat.completion}}, the conversation being
  the messages and the response's message;
- "jsonl" (lines): one chat message, or one of another API's, per line.

A recording (what --record-dir writes) is told apart before these and read by
formats/recording.py: its turns carry the recorded exchanges, which a Converted cannot.
"""

from __future__ import annotations

from typing import Any

from proxy.apis import APIS, Api
from proxy.errors import LoadError
from proxy.formats.harness_logs.reader import Converted, Lines, Misfit, Reader

NO_SHAPE = Misfit("not a list of messages or an object holding one")


def api_of(items: list[Any]) -> Api | None:
    """Whose messages a bare list holds (None: chat messages, the canonical form): decided by the
    first item only one API's list could hold (a tool call or result is there early in any real
    run), so a large file is not scanned twice."""
    for item in items:
        if not isinstance(item, dict):
            continue
        for api in APIS:
            marks = api.file.marks
            if marks is not None and marks(item):
                return api
    return None


def _listed(items: list[Any], filename: str, fmt: str, unit: str | None = None) -> Converted:
    """A list of chat messages, or of another API's messages, as chat messages."""
    api = api_of(items)
    if api is not None and api.file.read is not None:
        chat, indexes = api.file.read(items, filename, {})
        return Converted(chat, indexes, format=api.name, unit=unit)
    return Converted(list(items), list(range(len(items))), format=fmt, unit=unit)


def _holder(api: Api) -> Reader:
    """An object shaped like `api`'s request."""
    shape = api.file
    read = shape.read
    assert read is not None

    def miss(doc: Any) -> Misfit | None:
        return None if isinstance(doc, dict) and shape.holds(doc) else NO_SHAPE

    def convert(doc: Any, filename: str) -> list[Converted]:
        chat, indexes = read(doc[api.history], filename, doc)
        return [Converted(chat, indexes)]

    return Reader(api.name, False, miss, convert)


def _messages(doc: Any) -> list[Any] | None:
    messages = doc.get("messages") if isinstance(doc, dict) else None
    return messages if isinstance(messages, list) else None


def _response_message(response: Any, filename: str, index: int) -> Any:
    try:
        return response["choices"][0]["message"]
    except (TypeError, KeyError, IndexError):
        raise LoadError(filename, index, "response has no choices[0].message") from None


def _completion(doc: Any, filename: str) -> list[Converted]:
    messages = _messages(doc) or []
    message = _response_message(doc["response"], filename, len(messages))
    every = [*messages, message]
    return [Converted(every, list(range(len(every))))]


CHAT = Reader(
    "chat",
    False,
    lambda doc: None if isinstance(doc, list) else NO_SHAPE,
    lambda doc, filename: [_listed(doc, filename, "chat")],
)
ONE_MESSAGE = Reader(  # a JSONL file of a single message parses as one JSON document
    "jsonl",
    False,
    lambda doc: (
        None if isinstance(doc, dict) and _messages(doc) is None and "role" in doc else NO_SHAPE
    ),
    lambda doc, filename: [Converted([doc], [0])],
)
MESSAGES = Reader(
    "messages",
    False,
    lambda doc: None if _messages(doc) is not None and doc.get("response") is None else NO_SHAPE,
    lambda doc, filename: [Converted(list(doc["messages"]), list(range(len(doc["messages"]))))],
)
COMPLETION = Reader(
    "llm_completions",
    False,
    lambda doc: (
        None if _messages(doc) is not None and doc.get("response") is not None else NO_SHAPE
    ),
    _completion,
)


def _jsonl(lines: Lines, filename: str) -> list[Converted]:
    # numbered by their place among the file's values, as a chat list is, not by line
    return [_listed([value for _, value in lines], filename, "jsonl", unit="message")]


JSONL = Reader("jsonl", True, lambda lines: None, _jsonl)

# tried in this order, after the harness logs: a bare list, an API's request object, then the
# objects only chat messages come in
GENERIC: tuple[Reader, ...] = (
    CHAT,
    *(_holder(api) for api in APIS if api.file.read is not None),
    ONE_MESSAGE,
    MESSAGES,
    COMPLETION,
    JSONL,
)
