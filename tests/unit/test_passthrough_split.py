"""The pass-through's per-piece logic, for any split of a body into reads: the key mask holds across
pieces, and a stream's end is held from the first marker at the start of a line."""

from __future__ import annotations

import re
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from proxy.upstream.passthrough import _TERMINAL, _Holdback, _Mask

FIRST_MARKER = re.compile(b"(?:^|(?<=[\r\n]))(?:" + b"|".join(map(re.escape, _TERMINAL)) + b")")


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(body), *(c % (len(body) + 1) for c in cuts)})
    return [body[a:b] for a, b in pairwise(points)]


def masked(pieces: list[bytes], secret: bytes) -> list[bytes]:
    mask = _Mask(secret)
    return [mask.feed(piece) for piece in pieces] + [mask.feed(b"", last=True)]


def held(pieces: list[bytes], sse: bool = True) -> tuple[bytes, bytes]:
    """(what went out at once, what waited for the end)."""
    holdback = _Holdback(sse)
    return b"".join(holdback.take(piece) for piece in pieces), holdback.rest()


CUTS = st.lists(st.integers(min_value=0, max_value=400), max_size=12)
SECRETS = st.binary(min_size=1, max_size=6).map(lambda b: bytes(97 + x % 3 for x in b))  # "abc"
BODIES = st.lists(st.sampled_from([b"a", b"b", b"c", b"ab", b"abc", b"x", b"*", b"\n"])).map(
    b"".join
)


@given(BODIES, SECRETS, CUTS)
def test_the_mask_is_the_same_whatever_the_reads(
    body: bytes, secret: bytes, cuts: list[int]
) -> None:
    out = masked(split(body, cuts), secret)
    assert b"".join(out) == body.replace(secret, b"*" * len(secret))


@given(BODIES, SECRETS, CUTS)
def test_only_an_end_that_may_begin_the_key_waits(
    body: bytes, secret: bytes, cuts: list[int]
) -> None:
    mask = _Mask(secret)
    sent = b""
    for piece in split(body, cuts):
        sent += mask.feed(piece)
        assert len(mask.pending) < len(secret) and secret.startswith(mask.pending)
    assert len(sent) + len(mask.pending) == len(body)


def test_a_key_split_anywhere_is_masked() -> None:
    key = b"sk-upstream-key-0123456789"
    body = b'data: {"content":"' + key + b'"}\n\n' + key
    for at in range(1, len(body)):
        out = masked([body[:at], body[at:]], key)
        assert b"".join(out) == body.replace(key, b"*" * len(key)), at
        assert all(key not in piece for piece in out)


PARTS = st.sampled_from(
    [
        b"data: {}\n\n",
        b'data: {"t":"data: [DONE]"}\n\n',  # quoted: never an end
        b'data: {"t":"\\n\\nevent: message_stop"}\r\n\r\n',
        b"event: ping\r\n",
        b"id: 3\n",
        b"data: [DONE]\n\n",
        b"event: message_stop\r\ndata: {}\r\n\r\n",
        b"event: response.completed\rdata: {}\r\r",
        b"x event: message_stop\n",
        b"\n",
        b"\r",
    ]
)


@given(st.lists(PARTS, max_size=8).map(b"".join), CUTS)
def test_the_end_is_held_from_the_first_marker_at_a_line_start(
    body: bytes, cuts: list[int]
) -> None:
    pieces = split(body, cuts)
    now, rest = held(pieces)
    assert now + rest == body
    first = FIRST_MARKER.search(body)
    if first is None:
        assert rest == b""
        return
    # held from the marker, or from the read that completes it (a start of it that went out
    # before could not yet be told from any other line)
    starts = [sum(map(len, pieces[:i])) for i in range(len(pieces))]
    completing = max(s for s in starts if s < first.end())
    assert len(now) == max(first.start(), completing)


def test_a_marker_in_a_json_string_is_no_end() -> None:
    body = b'data: {"t":"say data: [DONE] and event: message_stop"}\n\n'
    assert held([body]) == (body, b"")
    assert held([body, b"data: [DONE]\n\n"]) == (body, b"data: [DONE]\n\n")


def test_a_marker_or_its_newline_split_between_reads_is_an_end() -> None:
    event = b'data: {"t":1}\n\n'
    for pieces, rest in (
        ([event + b"da", b"ta: [DONE]\n\n"], b"ta: [DONE]\n\n"),
        ([event, b"data: [DONE]\n\n"], b"data: [DONE]\n\n"),
        ([event[:-1], b"\ndata: [DONE]\n\n"], b"data: [DONE]\n\n"),
        ([event + b"event: message_", b"stop\n", b"data: {}\n\n"], b"stop\ndata: {}\n\n"),
        ([event + b"id: 3\r", b"\nevent: message_stop\r\n\r\n"], b"event: message_stop\r\n\r\n"),
        ([b"data: [DO", b"NE]\n\n"], b"NE]\n\n"),  # at the body's start
    ):
        body = b"".join(pieces)
        assert held(pieces) == (body[: len(body) - len(rest)], rest)


def test_a_body_not_a_stream_holds_its_last_piece() -> None:
    assert held([b"a", b"b", b"c"], sse=False) == (b"ab", b"c")


@given(st.lists(PARTS, max_size=6).map(b"".join), CUTS)
def test_holdback_then_mask_loses_and_repeats_nothing(body: bytes, cuts: list[int]) -> None:
    """As PassThrough does it: the mask on what goes out now, then on the rest at the end."""
    secret = b"data: [D"
    holdback, mask = _Holdback(True), _Mask(secret)
    out = [mask.feed(holdback.take(piece)) for piece in split(body, cuts)]
    out.append(mask.feed(holdback.rest(), last=True))
    assert b"".join(out) == body.replace(secret, b"*" * len(secret))
