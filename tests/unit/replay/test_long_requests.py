"""The replay core on requests and recordings of many pieces: the result is what it always was, and
a long input costs linear time (the long cases here took seconds to minutes when each turn scanned
every user message, each insertion moved the rest of the history, or a strict miss re-serialised
the request per recorded candidate and compared it byte by byte in Python)."""

from __future__ import annotations

import json
import random
from typing import Any

from proxy.apis import FIELDS
from proxy.apis.chat import parse_chat
from proxy.formats import load_bytes
from proxy.replay.conversation import Conversation
from proxy.replay.difference import Difference, first_difference, first_mismatch
from proxy.replay.engine import Diverged, Forward, ForwardReason, Scripted, decide
from proxy.replay.splice import Insertion, apply_chat
from proxy.replay.strict import StrictReplay
from proxy.replay.trajectory import Recorded, Trajectory, UserMessage

LONG = 20_000
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
START = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def tc(call_id: str, name: str = "bash") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def asst(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


def script(messages: list[dict[str, Any]]) -> Trajectory:
    return load_bytes(json.dumps(messages).encode(), name="long", filename="long.json")


def request(messages: list[dict[str, Any]], tools: list[Any] = TOOLS) -> Conversation:
    return parse_chat({"model": "m", "messages": messages, "tools": tools})


# ---- the user messages of a range of positions


def test_users_between_takes_those_strictly_inside_the_range_in_order() -> None:
    conv = request([*START, asst(content="a"), user("u3"), user("u4"), asst(content="b")])
    assert conv.users_between(1, 5) == [(3, "u3"), (4, "u4")]
    assert conv.users_between(3, 5) == [(4, "u4")]
    assert conv.users_between(-1, 4) == [(1, "task"), (3, "u3")]
    assert conv.users_between(4, 4) == [] and conv.users_between(5, 1) == []
    conv.users[7] = "u7"  # a user message read after the first look is seen too
    assert conv.users_between(4, 9) == [(7, "u7")]


# ---- follow-ups: one per exchange


def exchanges(n: int) -> list[dict[str, Any]]:
    """A tool turn, then n exchanges: an answer, and the user's next question."""
    messages = [*START, asst(tc("c0")), tool("c0")]
    for i in range(n):
        messages += [asst(content=f"answer {i}"), user(f"question {i + 1}")]
    return messages


def test_every_follow_up_of_a_long_conversation_is_compared() -> None:
    sent = exchanges(LONG)
    s = script(sent[:-1])  # the recording ends at the last answer
    assert len(s.turns) == LONG + 1 and all(t.follow_up for t in s.turns[2:])

    live = decide(request(sent), s)  # the whole script held, and a new question
    assert isinstance(live, Forward) and live.reason is ForwardReason.SCRIPT_DONE
    assert (live.held, live.splice) == (LONG + 1, ())

    due = decide(request(sent[:-2]), s)  # up to the last question: the last answer is due
    assert isinstance(due, Scripted) and due.turn.number == LONG + 1

    k = LONG // 2
    at = 4 + 2 * k - 1  # the position of question k
    changed = [*sent[:at], user("something else"), *sent[at + 1 :]]
    diverged = decide(request(changed), s)
    assert isinstance(diverged, Diverged) and diverged.divergence.kind == "follow-up"
    assert diverged.divergence.turn == k + 2
    assert diverged.divergence.difference.path == f"messages[{at}].content"


# ---- splices: a hint before every turn, half of them held already


def hinted(n: int) -> list[dict[str, Any]]:
    messages = [*START, asst(tc("c0")), tool("c0")]
    for i in range(1, n):
        messages += [user(f"hint {i}"), asst(tc(f"c{i}")), tool(f"c{i}")]
    return [*messages, user("trailing note")]


def test_a_long_history_missing_half_its_hints_gets_each_back_in_its_place() -> None:
    recorded = hinted(LONG)
    s = script(recorded)
    # the harness holds the even hints (another live run put them in), not the odd ones
    dropped = {f"hint {i}" for i in range(1, LONG, 2)} | {"trailing note"}
    sent = [m for m in recorded if not (m["role"] == "user" and m["content"] in dropped)]
    decision = decide(request(sent), s)
    assert isinstance(decision, Forward) and decision.held == LONG
    assert len(decision.splice) == LONG // 2 + 1  # the odd hints and the trailing note
    assert apply_chat(sent, decision.splice) == recorded

    again = decide(request(recorded), s)  # all held: nothing is put in twice
    assert isinstance(again, Forward) and again.splice == ()


def one_by_one(messages: list[Any], plan: tuple[Insertion, ...]) -> list[Any]:
    """apply_chat as it was: a slice insertion per insertion, the last position first."""
    out = list(messages)
    for insertion in sorted(plan, key=lambda i: i.position, reverse=True):
        out[insertion.position : insertion.position] = [
            {"role": "user", "content": u.content} for u in insertion.users
        ]
    return out


def test_the_chat_splice_is_what_inserting_one_by_one_gave() -> None:
    rng = random.Random(7)
    for n in range(6):
        messages = [{"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(n)]
        for _ in range(30):
            plan = tuple(
                Insertion(
                    rng.randint(0, n),
                    tuple(UserMessage(0, f"note {k}.{j}") for j in range(rng.randint(1, 2))),
                )
                for k in range(rng.randint(0, 4))
            )
            assert apply_chat(messages, plan) == one_by_one(messages, plan)


def test_many_insertions_into_a_long_chat_history_are_made_in_one_pass() -> None:
    n = 10 * LONG
    messages = [{"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(n)]
    plan = tuple(Insertion(p, (UserMessage(0, f"note {p}"),)) for p in range(0, n + 1, 2))
    spliced = apply_chat(messages, plan)
    assert len(spliced) == n + len(plan)
    assert [k for k, m in enumerate(spliced) if m["role"] == "user"] == [
        p + k for k, p in enumerate(range(0, n + 1, 2))
    ]


# ---- the tools a turn calls


def test_a_turn_of_many_calls_is_checked_against_many_tools() -> None:
    names = [f"tool_{i}" for i in range(LONG)]
    turn = asst(*(tc(f"c{i}", name) for i, name in enumerate(names)))
    s = script([*START, turn])
    offered = [{"type": "function", "function": {"name": n}} for n in reversed(names)]
    due = decide(request(START, offered), s)
    assert isinstance(due, Scripted) and len(due.turn.tool_calls) == LONG

    missing = decide(request(START, [f for f in offered if f["function"]["name"] != "tool_7"]), s)
    assert isinstance(missing, Diverged) and missing.divergence.difference.path == "tools"
    assert "'tool_7'" in missing.divergence.reason


def test_which_requests_take_tools() -> None:
    def takes(names: list[str], **extra: Any) -> bool:
        tools = [{"type": "function", "function": {"name": n}} for n in names]
        body = {"model": "m", "messages": START, "tools": tools, **extra}
        return parse_chat(body).takes_tools

    assert not takes([]) and not takes(["_noop"]) and not takes(["_noop", "_noop"])
    assert takes(["bash"]) and takes(["bash", "_noop"]) and takes(["_noop", "bash"])
    assert not takes(["bash"], tool_choice="none")
    assert takes(["_noop"] * LONG + ["bash"]) and not takes(["_noop"] * LONG)


# ---- strict: the nearest recorded request to a miss


def recorded(index: int, request: Any) -> Recorded:
    return Recorded(
        index, "chat", "toolless", "POST", "/v1/chat/completions", request, 200, False, "", b"{}"
    )


WHERE = {"lane": "toolless", "method": "POST", "path": "/v1/chat/completions"}


def test_the_closest_is_the_first_of_those_sharing_the_longest_prefix() -> None:
    def body(*texts: str) -> dict[str, Any]:
        return {"model": "m", "messages": [user(t) for t in texts]}

    side = [
        recorded(0, body("a", "b")),
        recorded(1, body("a", "b", "c", "x")),
        recorded(2, body("a", "b", "c", "y")),  # as near as 1: 1 is the first
        recorded(3, body("z")),
    ]
    miss = StrictReplay((), fields=FIELDS).closest(side, body=body("a", "b", "c", "d"), **WHERE)
    assert (miss.candidates, miss.closest) == (4, 1)
    assert miss.difference == Difference(
        "messages[3].content", '"x" (at character 0)', '"d" (at character 0)'
    )


def test_a_miss_against_a_large_recording_names_the_nearest() -> None:
    # 300 recorded requests sharing up to 2 MB with the one that misses
    big = [user(f"{k} " + "x" * 100_000) for k in range(20)]
    side = [
        recorded(i, {"model": "m", "messages": [*big[: i % 21], user(f"other {i}")]})
        for i in range(300)
    ]
    wanted = {"model": "m", "messages": [*big, user("new")]}
    miss = StrictReplay((), fields=FIELDS).closest(side, body=wanted, **WHERE)
    assert (miss.candidates, miss.closest) == (300, 20)
    assert miss.difference is not None and miss.difference.path == "messages[20].content"


# ---- the first difference


def test_first_mismatch_is_where_texts_and_bytes_first_differ() -> None:
    def naive(a: str, b: str) -> int:
        pairs = enumerate(zip(a, b, strict=False))
        return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))

    texts = [""] + [f"{n:b}"[1:] for n in range(1, 64)]  # every text of "0" and "1", up to 5 long
    for a in texts:
        for b in texts:
            assert first_mismatch(a, b) == naive(a, b)
            assert first_mismatch(a.encode(), b.encode()) == naive(a, b)
    n = 500 * LONG
    for at in (0, 1, n // 3, n - 1):
        other = "x" * at + "y" + "x" * (n - at - 1)
        assert first_mismatch("x" * n, other) == at
        assert first_mismatch(("x" * n).encode(), other.encode()) == at
    assert first_mismatch("x" * n, "x" * (n + 1)) == n


def reference(expected: Any, actual: Any, path: str = "") -> Difference | None:
    """first_difference as it was: each path written out as it went."""
    from proxy.replay.difference import around, render

    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in sorted(expected.keys() | actual.keys()):
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                return Difference(sub, render(expected[key]), "nothing (the key is missing)")
            if key not in expected:
                return Difference(sub, "nothing (no such key)", render(actual[key]))
            found = reference(expected[key], actual[key], sub)
            if found:
                return found
        return None
    if isinstance(expected, list) and isinstance(actual, list):
        for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
            found = reference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            i = min(len(expected), len(actual))
            exp = render(expected[i]) if i < len(expected) else f"{len(expected)} items"
            act = render(actual[i]) if i < len(actual) else f"{len(actual)} items"
            return Difference(f"{path}[{i}]", exp, act)
        return None
    if isinstance(expected, str) and isinstance(actual, str):
        if expected == actual:
            return None
        at = first_mismatch(expected, actual)
        return Difference(path, around(expected, at), around(actual, at))
    if type(expected) is type(actual) and expected == actual:
        return None
    return Difference(path, render(expected), render(actual))


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(6 if depth < 3 else 4)
    if kind == 0:
        return rng.choice([0, 1, 1.0, True, None])
    if kind in (1, 2, 3):
        return rng.choice(["", "a", "ab", "b"])
    if kind == 4:
        return [value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(["", "a", "b"]): value(rng, depth + 1) for _ in range(rng.randrange(3))}


def test_first_difference_is_what_it_was() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        a, b = value(rng), value(rng)
        for path in ("", "output"):
            assert first_difference(a, b, path) == reference(a, b, path)
            assert first_difference(a, a, path) is None
    assert first_difference({"": {"": [{"a": 1}]}}, {"": {"": [{"a": 2}]}}) == Difference(
        "[0].a", "1", "2"
    )


def test_a_difference_deep_in_a_wide_value_is_found_in_one_pass() -> None:
    def deep(leaf: Any) -> Any:
        for _ in range(400):
            leaf = {"k" * 20: leaf}
        return leaf

    found = first_difference(deep(list(range(10 * LONG))), deep([*range(10 * LONG), 1]))
    assert found is not None and found.path == ".".join(["k" * 20] * 400) + f"[{10 * LONG}]"
    assert (found.expected, found.actual) == (f"{10 * LONG} items", "1")
