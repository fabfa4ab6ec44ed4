"""A recording (--record-dir) -> Trajectory: its main-lane answers become the script.

The conversation is the last successful main-lane request plus its answer, with every exchange of
the session in it (a follow-up request carries the earlier ones); each of its assistant turns is
served exactly as it was recorded, and keeps the recorded exchange for strict replay. A
request retried after a failure or a timeout appears twice: only the last attempt is a step.
Exchanges of the other lanes are kept whole, to be matched in strict replay. A harness that calls
its tools through text leaves no main-lane exchange: its tool-less exchanges that continue one
another are its steps, and the script is text-based (proxy.replay.text_based).

A recording holds one run of its session: the recorder starts a file of its own for each run
(Run says when an exchange begins another), and a file that holds two runs (written by an older
version, or two files put together) is a load error naming the line where the second begins,
never read as the last of them.
"""

from __future__ import annotations

import dataclasses
import hashlib
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.apis import BY_NAME, Api, made_up_ids, usage_in
from proxy.errors import LoadError
from proxy.formats.answer import epoch
from proxy.formats.chat import trajectory_from_messages
from proxy.formats.harness_logs.reader import Lines, Misfit, Opened, Reader
from proxy.replay.content import text_of
from proxy.replay.normalize import squash
from proxy.replay.trajectory import Note, Recorded, Trajectory
from proxy.replay.usage import OutOfRange


def is_recording(first: Any) -> bool:
    return isinstance(first, dict) and first.get("type") == "exchange"


@dataclass(slots=True)
class Run:
    """What a run of a session has recorded so far, enough to tell when an exchange begins
    another run: the same session id used again (a harness that sends no session header is keyed
    by its system prompt and task, so running it twice on one task is one session).

    Another run begins with
    - a main-lane request that starts an agent loop (no answer of the model, no tool result in
      its history) once the run has a main-lane step: the agent started over. A follow-up carries
      the earlier exchanges, a retry repeats a request whose answer failed, so neither starts one;
    - for a run with no main-lane exchange (a harness that calls its tools through text), its
      first request again, after the run went on past it: a client repeats a request that got its
      answer only when it starts over.
    """

    id: str | None = None  # the run id its lines carry (the recorder's; None in older files)
    first: tuple[str, bytes] | None = None  # lane and digest of its first answered request
    went_on: bool = False  # an answered exchange of another request came after that one
    stepped: bool = False  # it has a main-lane step
    main: bool = False  # it has a main-lane exchange
    apis: Mapping[str, Api] = field(default_factory=lambda: BY_NAME)  # the APIs it was made in

    def begins_another(self, exchange: Mapping[str, Any]) -> str | None:
        """Why `exchange` begins another run, or None when it belongs to this one."""
        lane = exchange.get("lane")
        if lane == "main" and self.stepped and starts_a_loop(exchange, self.apis):
            return (
                "its conversation starts over (a request with no answer of the model in it, "
                "after the run's steps)"
            )
        if not self.main and self.went_on and lane != "main" and self.first == _key(exchange):
            return "its first request came again, after the run went on past it"
        return None

    def add(self, exchange: Mapping[str, Any]) -> None:
        lane = exchange.get("lane")
        self.main = self.main or lane == "main"
        if exchange.get("status") != 200 or exchange.get("error") is not None:
            return  # a failed attempt: the request may come again as a retry
        if lane == "main" and _usable_step(exchange):
            self.stepped = True
        if self.main:
            return  # the first request matters only to a run with no main lane
        key = _key(exchange)
        if self.first is None:
            self.first = key
        elif key != self.first:
            self.went_on = True


def starts_a_loop(exchange: Mapping[str, Any], apis: Mapping[str, Api] = BY_NAME) -> bool:
    """A request that begins an agent loop: its history is the task (a user message) with only
    system and developer messages beside it, no answer of the model and no tool result, and it
    continues no stored response."""
    request = exchange.get("request")
    if not isinstance(request, dict) or request.get("previous_response_id"):
        return False
    try:
        history = _chat_history(request, str(exchange.get("api", "chat")), "", 0, apis)
    except LoadError:
        return False
    roles = [m.get("role") if isinstance(m, dict) else None for m in history]
    return "user" in roles and all(r in ("system", "developer", "user") for r in roles)


def _key(exchange: Mapping[str, Any]) -> tuple[str, bytes]:
    body = orjson.dumps(exchange.get("request"), option=orjson.OPT_SORT_KEYS)
    return str(exchange.get("lane")), hashlib.sha256(body).digest()


def one_run(
    lines: Sequence[tuple[int, Any]], filename: str, apis: Mapping[str, Api] = BY_NAME
) -> None:
    """A LoadError at the line where a second run of the session begins, if one does."""
    run = Run(apis=apis)
    for k, (index, exchange) in enumerate(lines):
        if not is_recording(exchange):
            return  # said by the caller
        marked = exchange.get("run")
        if k == 0:
            run.id = marked if isinstance(marked, str) else None
        why = "its run id is another" if marked != run.id else run.begins_another(exchange)
        if why is not None:
            raise LoadError(
                filename,
                index,
                f"line {index + 1} begins another run of session {exchange.get('session')!r}: "
                f"{why}. A recording holds one run: replay-proxy now records each run of a "
                "session to a file of its own (SESSION.jsonl, SESSION.2.jsonl, ...); cut this "
                f"file before line {index + 1} to keep the first run, or record it again",
            )
        run.add(exchange)


def trajectory_from_recording(
    lines: Sequence[tuple[int, Any]],
    *,
    name: str,
    filename: str,
    digest: str,
    notes: Sequence[Note] = (),
    apis: Mapping[str, Api] = BY_NAME,
) -> Trajectory:
    """The run a recording holds, its exchanges read through the APIs they were made in."""
    one_run(lines, filename, apis)
    steps: list[tuple[int, dict[str, Any]]] = []
    others: list[tuple[int, dict[str, Any]]] = []
    for index, exchange in lines:
        if not is_recording(exchange):
            raise LoadError(filename, index, "not an exchange line in a recording")
        if exchange.get("lane") == "main":
            if _usable_step(exchange):
                steps.append((index, exchange))
        else:
            others.append((index, exchange))
    if not steps:
        steps = _text_based_steps(others, filename, apis)
    in_steps = {index for index, _ in steps}
    side = [_recorded(index, e, filename) for index, e in others if index not in in_steps]
    # a retry repeats its request: the later attempt is the step
    steps = [
        s
        for k, s in enumerate(steps)
        if k + 1 == len(steps) or steps[k + 1][1]["request"] != s[1]["request"]
    ]
    if not steps:
        return Trajectory(
            name=name, filename=filename, format="recording", digest=digest, task=None, system=None,
            turns=(), skipped=tuple(notes), side=tuple(side),
        )  # fmt: skip
    held_once([e["request"] for _, e in steps])
    last_index, last = steps[-1]
    sent = last.get("forwarded") or last["request"]
    messages = _chat_history(sent, last.get("api", "chat"), filename, last_index, apis)
    made_up = made_up_ids(apis.values())
    conversation = _with_recorded_answers(
        [*messages, last["message"]], [e for _, e in steps], made_up
    )
    try:
        t = trajectory_from_messages(
            conversation, name=name, filename=filename, fmt="recording", digest=digest
        )
    except LoadError as exc:
        raise LoadError(
            filename, last_index, f"message {exc.index} of its conversation: {exc.reason}"
        ) from None
    # in order: two exchanges may end in the same text ("Done."), each answered by its own step;
    # the steps of each key are looked up, not scanned per turn (a turn no step answered would
    # scan all the later ones)
    where: dict[tuple[str, ...], list[int]] = {}
    for k, (_, e) in enumerate(steps):
        where.setdefault(_ids(e["message"], made_up), []).append(k)
    turns = []
    at = 0
    for turn in t.turns:
        key = tuple(c.id for c in turn.tool_calls) or ("text", squash(turn.text))
        calls = ("calls", *(f"{c.name}\x00{c.arguments}" for c in turn.tool_calls))
        found = _first(where.get(key), at)
        other = _first(where.get(calls), at)
        if other is not None and (found is None or other < found):
            found = other
        if found is None:
            turns.append(turn)
            continue
        index, exchange = steps[found]
        try:
            usage = turn.usage or usage_in(*_answer_usage(exchange, apis))
            created = turn.created or epoch(exchange.get("started"))
        except OutOfRange as exc:
            raise LoadError(t.filename, index, str(exc)) from None
        turns.append(
            dataclasses.replace(
                turn, recorded=_recorded(index, exchange, t.filename), usage=usage, created=created
            )
        )
        at = found + 1
    return dataclasses.replace(
        t, turns=tuple(turns), skipped=(*notes, *t.skipped), side=tuple(side)
    )


def held_once(requests: list[Any]) -> None:
    """Each step repeats the history before it: an item whose text is the previous step's item's
    at the same place becomes that one object. A long run's recording then takes the memory of
    its last request, not of every request, and strict replay finds the recorded side's earlier
    items unchanged by identity (proxy.replay.normalize.normalize_body)."""
    before: dict[str, tuple[list[Any], list[bytes]]] = {}
    for request in requests:
        if not isinstance(request, dict):
            continue
        for key, items in request.items():
            if not isinstance(items, list):
                continue
            texts = [orjson.dumps(item) for item in items]
            old_items, old_texts = before.get(key, ([], []))
            for i in range(min(len(texts), len(old_texts))):
                if texts[i] == old_texts[i]:
                    items[i] = old_items[i]
            before[key] = (items, texts)


def _first(steps: list[int] | None, at: int) -> int | None:
    """The first of the (sorted) steps from `at` on."""
    if not steps:
        return None
    k = bisect_left(steps, at)
    return steps[k] if k < len(steps) else None


def _chat_history(
    sent: Any, api: str, filename: str, index: int, apis: Mapping[str, Api]
) -> list[Any]:
    """The conversation of a recorded request, as chat messages, whatever API it used."""
    if not isinstance(sent, dict):
        raise LoadError(filename, index, "the exchange has no request body")
    known = apis.get(api)
    if known is None:
        raise LoadError(filename, index, f"the exchange was made through an unknown API {api!r}")
    history = known.to_chat(sent, filename)
    if history is None:
        raise LoadError(filename, index, f"the request of a {api} exchange has no conversation")
    return history


def _text_based_steps(
    exchanges: list[tuple[int, dict[str, Any]]], filename: str, apis: Mapping[str, Api]
) -> list[tuple[int, dict[str, Any]]]:
    """A harness that calls its tools through text sends no tools, so all its requests were
    recorded as tool-less: its agent loop is the chain of tool-less exchanges in which each request
    carries an earlier one's request and answer. At least two are needed: a title or summary call
    is never continued, so it stays a side exchange."""
    keyed = []
    for index, exchange in exchanges:
        if exchange.get("lane") != "toolless" or not _usable_step(exchange):
            continue
        sent = exchange.get("forwarded") or exchange["request"]
        try:
            history = _chat_history(sent, exchange.get("api", "chat"), filename, index, apis)
        except LoadError:
            continue
        keyed.append((index, exchange, [_said(m) for m in history], _said(exchange["message"])))
    if not keyed:
        return []
    deepest = max(keyed, key=lambda k: (len(k[2]), k[0]))
    whole = [*deepest[2], deepest[3]]
    chain = [
        (i, e) for i, e, history, answer in keyed if whole[: len(history) + 1] == [*history, answer]
    ]
    return chain if len(chain) >= 2 else []


def _said(message: Any) -> tuple[str, str]:
    """A message as a text-based conversation is compared: its role and squashed text."""
    if not isinstance(message, dict):
        return ("", "")
    return (str(message.get("role")), squash(text_of(message.get("content"))))


def _usable_step(exchange: Mapping[str, Any]) -> bool:
    return (
        exchange.get("status") == 200
        and exchange.get("error") is None
        and isinstance(exchange.get("message"), dict)
        and isinstance(exchange.get("request"), dict)
    )


def _ids(message: dict[str, Any], made_up: tuple[str, ...]) -> tuple[str, ...]:
    """What finds a recorded answer's turn in the conversation: its call ids, or, for calls that
    came without ids (made up from their place in the answer alone: the Api row's `made_up`), their
    names and arguments; a text answer by its text."""
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    ids = tuple(str(c.get("id")) for c in calls)
    if ids and made_up and all(i.startswith(made_up) for i in ids):
        return (
            "calls",
            *(f"{c['function']['name']}\x00{c['function']['arguments']}" for c in calls),
        )
    if ids:
        return ids
    content = message.get("content")
    return ("text", squash(content) if isinstance(content, str) else "")  # echoed back re-wrapped


def _with_recorded_answers(
    conversation: list[Any], steps: list[dict[str, Any]], made_up: tuple[str, ...]
) -> list[Any]:
    """The harness may re-serialise what it echoes back; serve what was really answered."""
    # an answer whose calls came without ids is not put in: the history's ids are the ones the
    # harness used (its own, or the places they hold in the conversation)
    answers = {
        k: e["message"] for e in steps if (k := _ids(e["message"], made_up))[:1] != ("calls",)
    }
    out = []
    for message in conversation:
        if isinstance(message, dict) and message.get("role") == "assistant":
            message = answers.get(_ids(message, made_up), message)
        out.append(message)
    return out


def _answer_usage(exchange: dict[str, Any], apis: Mapping[str, Api]) -> tuple[Any, Api | None]:
    """The usage the recorded answer carried, in its API's shape (its row's `usage_field`), and
    that API: a JSON answer's own, or for a stream the last one its events carried (Anthropic's:
    message_start's, then message_delta's)."""
    api = apis.get(str(exchange.get("api")))
    named = api.usage_field if api is not None else "usage"
    response = exchange.get("response")
    if isinstance(response, dict):
        return response.get(named), api
    found: dict[str, Any] = {}
    for event in exchange.get("events") or []:
        data = event.partition("data: ")[2] if isinstance(event, str) else ""
        if not data.startswith("{"):
            continue
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            continue
        inner = chunk.get("message") or chunk.get("response") or {}
        usage = chunk.get(named) or (inner.get(named) if isinstance(inner, dict) else None)
        if isinstance(usage, dict):
            found = {**found, **usage}
    return found or None, api


def _recorded(index: int, exchange: dict[str, Any], filename: str) -> Recorded:
    status = exchange.get("status") or 0  # 0: no answer came (the client left, a timeout)
    if type(status) is not int or not (100 <= status <= 599 or status == 0):
        raise LoadError(
            filename, index, f"status is {str(status)[:30]}: an answer's is a number, 100 to 599"
        )
    events = exchange.get("events")
    if isinstance(events, list):
        body = "".join(f"{e}\n\n" for e in events).encode()
    else:
        body = orjson.dumps(exchange.get("response"))
    return Recorded(
        index=index,
        api=str(exchange.get("api", "chat")),
        lane=str(exchange.get("lane")),
        method=str(exchange.get("method", "POST")),
        path=str(exchange.get("path", "")),
        request=exchange.get("request"),
        status=status,
        stream=bool(exchange.get("stream")),
        content_type=str(exchange.get("content_type") or "application/json"),
        body=body,
        preset=preset if isinstance(preset := exchange.get("preset"), str) else None,
    )


def _lines_miss(items: Lines) -> Misfit | None:
    if is_recording(items[0][1]):
        return None
    return Misfit('its first line is not an exchange ({"type": "exchange", ...})')


def _one_miss(doc: Any) -> Misfit | None:
    return None if is_recording(doc) else Misfit('not an exchange ({"type": "exchange", ...})')


def _build(items: Lines, opened: Opened) -> list[Trajectory]:
    return [
        trajectory_from_recording(
            items,
            name=opened.name,
            filename=opened.filename,
            digest=opened.digest,
            notes=opened.notes,
            apis=opened.apis,
        )
    ]


# a recording is told apart before any other format: one exchange per line, or a file of one
RECORDINGS = (
    Reader("recording", True, _lines_miss, None, _build),
    Reader("recording", False, _one_miss, None, lambda doc, opened: _build([(0, doc)], opened)),
)
