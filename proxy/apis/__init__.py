"""The APIs a scripted turn can be served through, side by side: how each one's request is
read, how a turn is written in it, where user messages are spliced in, what of the proxy's own
making is taken out before a conversation goes to the real model, how an answer is read back,
its error shape and its way upstream. The `Api` table below is the one place the rest of the
proxy learns about an API: a new API is a module and a row.

    chat.py        OpenAI Chat Completions (/v1/chat/completions)
    responses.py   OpenAI Responses (/v1/responses)
    anthropic.py   Anthropic Messages (/v1/messages)
    gemini.py      Gemini (/v1beta/models/{model}:generateContent, :streamGenerateContent)
    vertex.py      Anthropic on Vertex AI (/v1/projects/.../models/{model}:streamRawPredict)
    bedrock.py     Anthropic on Bedrock (/model/{model}/invoke-with-response-stream)
    framing.py     how a stream's events cross the wire (SSE; eventstream.py: Bedrock's frames)
    *_history.py   a conversation in the API's shape as chat messages (recordings, trajectory files)
    idless.py      calls that come without ids: a made-up id, and results matched by name
    keys.py        where keys travel when no API says otherwise (the plain dialect)
    readback.py    an answer read back from the wire (recordings, dumps), SSE split into events
    request.py     what every request body must have before the decision reads it
    responses_socket.py  a Responses WebSocket frame read as a request body, and the proxy's own

Each API module is pure: a body in, a Conversation out; a Turn in, bytes out.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.apis import (
    anthropic,
    anthropic_history,
    bedrock,
    chat,
    gemini,
    gemini_history,
    responses,
    responses_history,
    vertex,
)
from proxy.apis.framing import SSE, Framing
from proxy.apis.keys import COMMON, PLAIN
from proxy.apis.readback import Assembled
from proxy.apis.request import loads_object
from proxy.replay.conversation import Conversation
from proxy.replay.normalize import Fields
from proxy.replay.splice import Insertion, apply_chat
from proxy.replay.tokens import without_tokens
from proxy.replay.trajectory import Turn, Usage
from proxy.upstream.dialect import Dialect

Read = Callable[[Sequence[Any], str, dict[str, Any]], tuple[list[dict[str, Any]], list[int]]]


@dataclass(frozen=True, slots=True)
class FileShape:
    """A conversation written in an API's shape, read as chat messages: a recorded request's, and
    a trajectory file's, as formats/loading.py tells it apart (a bare list of the API's messages,
    or an object shaped like its request)."""

    holds: Callable[[dict[str, Any]], bool]  # a file's object in this API's request shape
    marks: Callable[[dict[str, Any]], bool] | None  # an item of a bare list only this API writes
    # its history (and the object, for a system prompt) as chat messages, each with the index it
    # came from; None: already chat messages
    read: Read | None
    text: bool = False  # the history may be plain text, one user message (Responses' `input`)
    # how a file's error names its forms: its bare list's messages ("Anthropic"), its object
    # ('Gemini {"contents": [...]}'); None: a form it has not
    bare: str | None = None
    document: str | None = None


@dataclass(frozen=True, slots=True)
class Api:
    """One API, whole: everything the proxy knows of it is here or in its module. A new API is a
    module and a row (tests/wire/apis/test_fifth_api.py shows one)."""

    name: str  # chat | responses | anthropic | gemini | vertex | bedrock: its label everywhere
    title: str  # what it is called in the OpenAPI document
    paths: tuple[str, ...]  # the POST paths it answers (from a script, or forwarded)
    documented: tuple[str, ...]  # its paths as the OpenAPI document writes them
    history: str  # the body field holding the conversation
    parse: Callable[[Any], Conversation]
    stream: Callable[[Turn, Conversation, dict[str, Any], str], list[bytes]]
    whole: Callable[[Turn, Conversation, dict[str, Any], str], bytes]
    splice: Callable[[list[Any], tuple[Insertion, ...]], list[Any]]
    clean: Callable[[list[Any]], list[Any] | None]  # None: nothing to take out
    read_answer: Callable[[bytes, bool], Assembled]
    file: FileShape  # its history read as chat messages (recordings, trajectory files)
    # an OpenAI-shaped error body in this API's shape, by status (None: OpenAI's own)
    error_body: Callable[[dict[str, Any], int], dict[str, Any]] | None = None
    error_shape: str = "OpenAI"  # whose error shape, as the OpenAPI document says
    upstream: Dialect = PLAIN  # how its requests go upstream, and where a key goes
    # paths it answers beyond `paths`, by their form (Gemini's /v1beta/models/{model}:...)
    serves: Callable[[str], bool] | None = None
    # other paths that are its own when forwarded: their errors take its shape, and they go
    # upstream in its dialect (Gemini's /v1beta/models list, :countTokens)
    claims: Callable[[str], bool] | None = None
    # what the URL says about the request (Gemini: the model and the streaming), if anything
    target: Callable[[Conversation, str, str], None] | None = None
    # who adds /v1 to a base URL themselves, said when a path comes with /v1 twice
    adds_v1: str = "this client adds"
    # its paths also take a WebSocket, whose frames are its requests (proxy.apis.responses_socket)
    socket: bool = False
    # what a stream event that carries a tool call holds: a cut answer (the drop fault) stops
    # before it, since a harness that runs calls as they stream in would run it, then retry
    call_event: bytes = b""
    # how its stream's events cross the wire (SSE, or Bedrock's event stream frames)
    framing: Framing = SSE
    # the field of an answer (and of a stream's chunk, or the object inside it) holding its usage
    usage_field: str = "usage"
    # that usage read into the proxy's Usage (None: not in its shape)
    read_usage: Callable[[dict[str, Any]], Usage | None] = lambda _: None
    # the start of an id its reading makes up for a call that came without one (None: calls
    # always carry ids): such ids are not the harness's own
    made_up: str | None = None
    # the fields of its bodies that hold ids (strict replay numbers them: a harness echoes ids
    # the model made up, and mints its own), and those dropped before comparing (markers that
    # move between runs, metadata a harness adds for its own backend)
    id_fields: frozenset[str] = frozenset({"id"})
    dropped_fields: frozenset[str] = frozenset()
    # what OpenTelemetry's GenAI conventions call it: who serves it (gen_ai.provider.name), and
    # what a request of it does (gen_ai.operation.name)
    provider: str = ""
    operation: str = "chat"

    def read(self, raw: bytes, path: str, query: str) -> tuple[dict[str, Any], Conversation]:
        """A request body: the JSON object, and the Conversation the decision reads."""
        body = loads_object(raw)
        return body, self.conversation(body, path, query)

    def conversation(self, body: dict[str, Any], path: str, query: str) -> Conversation:
        """What the decision reads of a body, with what the URL adds to it (Gemini: the model
        and the streaming)."""
        conv = self.parse(body)
        if self.target is not None:
            self.target(conv, path, query)
        return conv

    def live(
        self, body: dict[str, Any], splice: tuple[Insertion, ...], *, tokens: bool = True
    ) -> tuple[dict[str, Any] | None, int]:
        """The body to send upstream once the script is used up, and how many user messages
        were spliced into it: the recording's later user messages spliced in, what only the
        proxy made up taken out, and the token fields too unless `tokens`
        (Trajectory.tokens_upstream); None when it is the body as the client sent it."""
        history = body.get(self.history)
        if not isinstance(history, list):
            return None, 0
        # splice first: its positions are those of the history as the client sent it
        spliced = self.splice(history, splice) if splice else history
        cleaned = self.clean(spliced)
        if not tokens:
            cleaned = without_tokens(cleaned if cleaned is not None else spliced) or cleaned
        count = sum(len(i.users) for i in splice)
        if cleaned is None and not splice:
            return None, count
        return {**body, self.history: cleaned if cleaned is not None else spliced}, count

    def to_chat(self, body: dict[str, Any], filename: str) -> list[Any] | None:
        """A recorded request's conversation as chat messages (None: it has none)."""
        history = body.get(self.history)
        if isinstance(history, str) and self.file.text:
            history = [{"role": "user", "content": history}]
        if not isinstance(history, list):
            return None
        if self.file.read is None:
            return list(history)
        return self.file.read(history, filename, body)[0]


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
    name="chat",
    title="OpenAI chat completions",
    paths=("/v1/chat/completions", "/chat/completions"),
    documented=("/v1/chat/completions",),
    history="messages",
    parse=chat.parse_chat,
    stream=_chat_stream,
    whole=_chat_whole,
    splice=apply_chat,
    clean=lambda _: None,
    read_answer=lambda raw, stream: chat.read_answer(raw, stream=stream),
    file=FileShape(lambda _: False, chat.marks, None),  # the loader's own forms
    read_usage=chat.read_usage,
    id_fields=frozenset({"id", "tool_call_id"}),
    provider="openai",
    call_event=b'"tool_calls"',
)
RESPONSES = Api(
    name="responses",
    title="OpenAI Responses API",
    paths=("/v1/responses", "/responses"),
    documented=("/v1/responses",),
    history="input",
    parse=responses.parse_responses,
    stream=lambda turn, conv, body, key: responses.response_events(
        turn, body, key=key, created=created(turn)
    ),
    whole=lambda turn, conv, body, key: responses.response_object(
        turn, body, key=key, created=created(turn)
    ),
    splice=responses.splice,
    clean=responses.clean,
    read_answer=lambda raw, stream: responses.read_answer(raw, stream=stream),
    file=FileShape(
        responses_history.holds,
        responses_history.marks,
        responses_history.read,
        text=True,
        bare="Responses",
        document='{"input": [...]}',
    ),
    socket=True,
    call_event=b'"function_call"',
    read_usage=responses_history.read_usage,
    id_fields=frozenset({"id", "call_id"}),
    provider="openai",
    # Codex's built-in provider puts a turn id and a creation time on each input item for its
    # own backend: nothing the model reads, and new on every run
    dropped_fields=frozenset({"internal_chat_message_metadata_passthrough"}),
)
ANTHROPIC = Api(
    name="anthropic",
    title="Anthropic Messages API",
    paths=("/v1/messages", "/messages"),  # Claude Code adds ?beta=true: the query does not matter
    documented=("/v1/messages",),
    history="messages",
    parse=anthropic.parse_anthropic,
    stream=lambda turn, conv, body, key: anthropic.message_events(
        turn, body, key=key, model=conv.model
    ),
    whole=lambda turn, conv, body, key: anthropic.message_object(
        turn, body, key=key, model=conv.model
    ),
    splice=anthropic.splice,
    clean=anthropic.clean,
    read_answer=lambda raw, stream: anthropic.read_answer(raw, stream=stream),
    error_body=anthropic.error_body,
    error_shape="Anthropic",
    adds_v1="the Anthropic SDK and Claude Code add",
    file=FileShape(
        anthropic_history.holds,
        anthropic_history.marks,
        anthropic_history.read,
        bare="Anthropic",
        document='{"messages": [...], "system"}',
    ),
    call_event=b'"tool_use"',
    read_usage=anthropic_history.read_usage,
    id_fields=frozenset({"id", "tool_use_id"}),
    dropped_fields=frozenset({"cache_control"}),  # moves to the newest message on every turn
    provider="anthropic",
)
GEMINI = Api(
    name="gemini",
    title="Gemini API",
    paths=(),
    documented=(
        "/v1beta/models/{model}:generateContent",
        "/v1beta/models/{model}:streamGenerateContent",
    ),
    history="contents",
    parse=gemini.parse_gemini,
    stream=lambda turn, conv, body, key: gemini.response_events(turn, conv, body, key),
    whole=lambda turn, conv, body, key: gemini.response_object(turn, conv, body, key),
    splice=gemini.splice,
    clean=lambda _: None,
    read_answer=lambda raw, stream: gemini.read_answer(raw, stream=stream),
    error_body=gemini.error_body,
    error_shape="Google",
    # Google takes an API key as x-goog-api-key or ?key=, not a Bearer
    upstream=Dialect(
        keeps_version=True,
        key_header=b"x-goog-api-key",
        key_query="key",
        credentials=COMMON | {b"x-goog-api-key"},
    ),
    serves=gemini.is_gemini_path,
    claims=gemini.claims,
    target=gemini.target,
    file=FileShape(
        gemini_history.holds, None, gemini_history.read, document='Gemini {"contents": [...]}'
    ),
    call_event=b'"functionCall"',
    usage_field="usageMetadata",
    read_usage=gemini_history.read_usage,
    provider="gcp.gemini",
    operation="generate_content",
    made_up=gemini_history.MADE_UP,
)
# Anthropic's Messages API on another cloud: Anthropic's row, but for the URL, the way upstream,
# and (Bedrock) the framing and the error shape
ANTHROPIC_FILES = FileShape(lambda _: False, None, anthropic_history.read)  # read as Anthropic's
VERTEX = dataclasses.replace(
    ANTHROPIC,
    name="vertex",
    title="Anthropic on Google Vertex AI",
    paths=(),
    documented=(
        "/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict",
        "/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}"
        ":streamRawPredict",
    ),
    upstream=Dialect(keeps_version=True),  # a Bearer: the gateway's Google access token
    serves=vertex.serves,
    claims=vertex.claims,
    target=vertex.target,
    file=ANTHROPIC_FILES,
    provider="gcp.vertex_ai",
)
BEDROCK = dataclasses.replace(
    ANTHROPIC,
    name="bedrock",
    title="Anthropic on Amazon Bedrock",
    paths=(),
    documented=("/model/{model}/invoke", "/model/{model}/invoke-with-response-stream"),
    read_answer=lambda raw, stream: bedrock.read_answer(raw, stream=stream),
    error_body=bedrock.error_body,
    error_shape="Amazon Bedrock",
    # a Bearer (a Bedrock API key); a client's SigV4 signature names the proxy's host, not the
    # upstream's, so it cannot be passed on: its session token is a credential to drop
    upstream=Dialect(keeps_version=True, credentials=COMMON | {b"x-amz-security-token"}),
    serves=bedrock.serves,
    claims=bedrock.claims,
    target=bedrock.target,
    file=ANTHROPIC_FILES,
    framing=bedrock.FRAMING,
    provider="aws.bedrock",
)
APIS = (CHAT, RESPONSES, ANTHROPIC, GEMINI, VERTEX, BEDROCK)
BY_NAME = {api.name: api for api in APIS}


def made_up_ids(apis: Iterable[Api]) -> tuple[str, ...]:
    """The starts of every id these APIs' reading makes up (a recording's calls that came
    without ids)."""
    return tuple(api.made_up for api in apis if api.made_up is not None)


# a usage whose API a file does not say is read by the first of these that knows its shape: the
# Messages API's (known by its cache fields) before the Responses names it shares
USAGE_ORDER = (GEMINI, CHAT, ANTHROPIC, RESPONSES)


def usage_in(value: Any, api: Api | None = None) -> Usage | None:
    """A recorded usage read into the proxy's Usage: in `api`'s shape, else in whichever of the
    table's APIs' it was written; None when it holds no counts."""
    if not isinstance(value, dict):
        return None
    for row in (api, *USAGE_ORDER) if api is not None else USAGE_ORDER:
        if row is not None and (usage := row.read_usage(value)) is not None:
            return usage
    return None


def fields_of(apis: Iterable[Api]) -> Fields:
    """The id and dropped fields of these APIs together, as strict replay compares bodies."""
    rows = tuple(apis)
    return Fields(
        frozenset().union(*(api.id_fields for api in rows)),
        frozenset().union(*(api.dropped_fields for api in rows)),
    )


FIELDS = fields_of(APIS)  # the built-in APIs' (what the command-line tools and the workers read)
