"""Property-based tests: no input makes the loader, the parsers or the decision raise anything but
their documented errors; the same history always gets the same turn; and a turn is only ever
served for the history it belongs to."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.apis.anthropic import parse_anthropic
from proxy.apis.chat import parse_chat
from proxy.apis.responses import parse_responses
from proxy.errors import BadRequest, LoadError
from proxy.formats import load_bytes
from proxy.replay.conversation import Conversation
from proxy.replay.engine import Diverged, DivergencePolicy, Forward, Rules, Scripted, decide
from proxy.replay.trajectory import Trajectory

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=30,
)
ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "", "x"])
IDS = st.sampled_from(["c1", "c2", "c3", "call_x", ""]) | st.none()
CONTENT = (
    st.none()
    | st.text(max_size=30)
    | st.lists(
        st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}), max_size=3
    )
    | JSON
)


@st.composite
def tool_call(draw: st.DrawFn) -> Any:
    fn = draw(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(["bash", "read", ""]) | st.none(),
                "arguments": st.sampled_from(['{"a": 1}', "", "{oops", "[1]"]) | JSON,
            }
        )
    )
    call: dict[str, Any] = {"type": "function", "function": fn}
    ident = draw(IDS)
    if ident is not None:
        call["id"] = ident
    return draw(st.just(call) | JSON)


@st.composite
def message(draw: st.DrawFn) -> Any:
    m: dict[str, Any] = {"role": draw(ROLES), "content": draw(CONTENT)}
    if draw(st.booleans()):
        m["tool_calls"] = draw(st.lists(tool_call(), max_size=3) | JSON)
    if draw(st.booleans()):
        m["tool_call_id"] = draw(IDS)
    if draw(st.booleans()):
        m["reasoning_content"] = draw(st.text(max_size=10) | JSON)
    return draw(st.just(m) | JSON)


FILES = (
    st.lists(message(), max_size=8).map(lambda ms: json.dumps(ms).encode())
    | JSON.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=60)
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(FILES)
def test_the_loader_raises_nothing_but_load_error(data: bytes) -> None:
    try:
        t = load_bytes(data, name="t", filename="t.json")
    except LoadError as exc:
        assert str(exc).startswith("t.json")
        return
    for turn in t.turns:
        for call in turn.tool_calls:
            orjson.loads(call.arguments)  # every served argument string is valid JSON
        # a turn with no call and no text is an empty answer: only the last answer can be one
        assert turn.tool_calls or turn.text.strip() or turn is t.turns[-1]


@settings(max_examples=300)
@given(JSON)
def test_the_parsers_raise_nothing_but_bad_request(body: Any) -> None:
    for parse in (parse_chat, parse_responses, parse_anthropic):
        with contextlib.suppress(BadRequest):
            parse(body)


# A script of three turns with known ids, and histories made of its turns, some altered.
SCRIPT: Trajectory = load_bytes(
    json.dumps(
        [
            {"role": "user", "content": "task"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "ok"},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "t2a",
                        "type": "function",
                        "function": {"name": "bash", "arguments": "{}"},
                    },
                    {
                        "id": "t2b",
                        "type": "function",
                        "function": {"name": "read", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "t2a", "content": "ok"},
            {"role": "tool", "tool_call_id": "t2b", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ]
    ).encode(),
    name="s",
    filename="s.json",
)
REPLIES = [
    {"role": "assistant", "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
    {"role": "assistant", "tool_calls": [{"id": "t2a", "type": "function", "function": {"name": "bash", "arguments": "{}"}},
                                         {"id": "t2b", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
    {"role": "assistant", "content": "done"},
]  # fmt: skip
TOOLS = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("bash", "read")]


@st.composite
def history(draw: st.DrawFn) -> list[dict[str, Any]]:
    """The first k scripted turns (with results), perhaps altered, perhaps followed by live ones."""
    k = draw(st.integers(0, 3))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "task"}]
    for i in range(k):
        reply = json.loads(json.dumps(REPLIES[i]))
        if draw(st.integers(0, 5)) == 0 and reply.get("tool_calls"):
            reply["tool_calls"][0]["id"] = draw(st.sampled_from(["zz", "t1", "t2a", "t2b", ""]))
        if draw(st.integers(0, 8)) == 0 and reply.get("tool_calls"):
            reply["tool_calls"] = reply["tool_calls"][:-1] or reply["tool_calls"]
        messages.append(reply)
        for call in reply.get("tool_calls", []):
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": draw(st.text(max_size=5))}
            )
    for _ in range(draw(st.integers(0, 2))):
        messages.append(
            draw(
                st.sampled_from(
                    [
                        *REPLIES,
                        {"role": "assistant", "content": "live"},
                        {"role": "user", "content": "hi"},
                    ]
                )
            )
        )
    return messages


def _conv(messages: list[dict[str, Any]]) -> Conversation:
    return parse_chat({"model": "m", "messages": messages, "tools": TOOLS})


def _replies(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        m
        for m in messages
        if m.get("role") == "assistant" and (m.get("tool_calls") or m.get("content"))
    ]


def _same(got: dict[str, Any], want: dict[str, Any]) -> bool:
    ids = [c["id"] for c in got.get("tool_calls") or []]
    if ids != [c["id"] for c in want.get("tool_calls") or []]:
        return False
    return bool(ids) or got.get("content") == want.get("content")


def _matching_prefix(messages: list[dict[str, Any]]) -> int:
    """How many leading assistant replies are the scripted ones, by ids (or text)."""
    n = 0
    for got, want in zip(_replies(messages), REPLIES, strict=False):
        if not _same(got, want):
            break
        n += 1
    return n


@settings(max_examples=500)
@given(history(), st.sampled_from(list(DivergencePolicy)))
def test_the_same_history_gets_the_same_turn_and_only_its_own(
    messages: list[dict[str, Any]], policy: DivergencePolicy
) -> None:
    rules = Rules(on_divergence=policy)
    first = decide(_conv(messages), SCRIPT, rules=rules)
    again = decide(_conv(json.loads(json.dumps(messages))), SCRIPT, rules=rules)
    assert type(first) is type(again)
    held = _matching_prefix(messages)
    if isinstance(first, Scripted):
        assert isinstance(again, Scripted) and first.turn is again.turn
        # served only for its own history: exactly the turns before it, nothing after
        assert held == first.turn.number - 1 == len(_replies(messages))
    elif isinstance(first, Diverged):
        assert policy is DivergencePolicy.ERROR
        d = first.divergence.turn
        assert (
            held == d - 1 and len(_replies(messages)) >= d
        )  # the d-th reply is the first that differs
    else:
        assert isinstance(first, Forward)
        if first.divergence is None:
            assert held == 3  # live only once the whole script is held
        else:
            assert policy is DivergencePolicy.LIVE and held == first.divergence.turn - 1


@settings(max_examples=300)
@given(st.lists(message(), max_size=6), JSON)
def test_the_decision_never_raises_on_any_parsable_request(messages: list[Any], tools: Any) -> None:
    try:
        conv = parse_chat({"model": "m", "messages": messages, "tools": tools})
    except BadRequest:
        return
    decide(conv, SCRIPT)
    decide(conv, SCRIPT, rules=Rules(on_divergence=DivergencePolicy.LIVE))
    decide(conv, None)
