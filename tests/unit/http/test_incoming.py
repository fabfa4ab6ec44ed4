"""A request as the hot path reads it from the ASGI scope: headers decoded only when read, the
target refused when it holds what would split a request line, the body bounded and parsed with
errors that say what was wrong."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.errors import BadRequest, ClientClosedRequest, PayloadTooLarge, TooDeep
from proxy.http.incoming import OFF_LOOP, Headers, Incoming, receive_request
from proxy.http.prefix import Named

RAW = [
    (b"content-type", b"application/json"),
    (b"x-session-affinity", b"ses_1"),
    (b"x-note", "café".encode()),
    (b"x-dup", b"first"),
    (b"x-dup", b"last"),
]


def incoming(
    body: bytes, raw: list[tuple[bytes, bytes]] = RAW, named: Named | None = None
) -> Incoming:
    return Incoming(
        "POST", "/v1/chat/completions", "/v1/chat/completions", "", raw, Headers(raw), body, named
    )


def test_headers_are_read_by_name_and_a_repeated_one_keeps_its_last_value() -> None:
    h = Headers(RAW)
    assert h["x-session-affinity"] == "ses_1" and h.get("x-dup") == "last"
    assert h.get("x-absent") is None and h.get("x-absent", "d") == "d"
    with pytest.raises(KeyError):
        h["x-absent"]
    assert h.raw(b"x-note") == "café".encode() and h["x-note"] == "café".encode().decode("latin-1")
    assert list(h) == ["content-type", "x-session-affinity", "x-note", "x-dup"] and len(h) == 4
    assert "x-dup" in h and "X-Dup" not in h  # names come from ASGI in lower case


def test_the_body_must_be_a_json_object() -> None:
    assert incoming(b'{"model": "m", "messages": []}').json() == {"model": "m", "messages": []}
    with pytest.raises(BadRequest, match="must be a JSON object"):
        incoming(b"[1, 2]").json()
    with pytest.raises(BadRequest, match="is not valid JSON"):
        incoming(b'{"model": ').json()


def test_an_empty_body_with_an_upgrade_says_to_send_it_without() -> None:
    raw = [(b"upgrade", b"h2c"), (b"connection", b"Upgrade, HTTP2-Settings")]
    with pytest.raises(BadRequest, match=r"curl --http1\.1") as refused:
        incoming(b"", raw).json()
    assert refused.value.param == "upgrade"
    with pytest.raises(BadRequest, match="is not valid JSON"):
        incoming(b"", []).json()


def test_json_nested_too_deeply_is_refused_as_too_deep() -> None:
    deep = b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    with pytest.raises(TooDeep) as refused:
        incoming(deep).json()
    assert refused.value.param == "body"


def test_the_path_names_the_session_and_trajectory_before_the_headers() -> None:
    raw = [*RAW, (b"x-replay-trajectory", b"from-header")]
    assert incoming(b"{}", raw).trajectory == "from-header" and incoming(b"{}", raw).session is None
    by_path = incoming(b"{}", raw, Named("ses_p", "from-path", "/v1/x", b"/v1/x"))
    assert (by_path.session, by_path.trajectory) == ("ses_p", "from-path")
    session_only = incoming(b"{}", raw, Named("ses_p", None, "/v1/x", b"/v1/x"))
    assert session_only.trajectory == "from-header"


def test_a_body_is_large_past_the_off_loop_size() -> None:
    assert not incoming(b"x" * OFF_LOOP).large
    assert incoming(b"x" * (OFF_LOOP + 1)).large


def scope(raw_path: bytes = b"/v1/chat/completions", query: bytes = b"") -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": raw_path.decode(),
        "raw_path": raw_path,
        "query_string": query,
        "headers": RAW,
    }


def messages(*sent: dict[str, Any]) -> Any:
    pending = list(sent)

    async def receive() -> dict[str, Any]:
        return pending.pop(0)

    return receive


def piece(data: bytes, more: bool = False) -> dict[str, Any]:
    return {"type": "http.request", "body": data, "more_body": more}


async def test_a_request_is_read_with_its_body_in_pieces() -> None:
    got = await receive_request(
        scope(query=b"alt=sse"), messages(piece(b'{"a"', True), piece(b": 1}")), 100, Headers(RAW)
    )
    assert (got.method, got.raw_path, got.query, got.body) == (
        "POST",
        "/v1/chat/completions",
        "alt=sse",
        b'{"a": 1}',
    )
    assert got.json() == {"a": 1}


@pytest.mark.parametrize(
    ("raw_path", "query"),
    [(b"/v1/chat completions", b""), (b"/v1/models", b"a=b\r\nHost: evil"), (b"/v1/\x00", b"")],
)
async def test_a_target_that_could_split_the_upstream_request_line_is_refused(
    raw_path: bytes, query: bytes
) -> None:
    with pytest.raises(BadRequest, match="space or a control character"):
        await receive_request(scope(raw_path, query), messages(piece(b"{}")), 100, Headers(RAW))


@pytest.mark.parametrize(
    "raw_path",
    [
        b"/v1/../../victim/v1/models",
        b"/v1/%2e%2E/x",
        b"/v1/./models",
        b"/v1/x%2F..%2Fy",
        b"/v1beta/models/%2E%2E/%2E%2E/x:generateContent",
    ],
)
async def test_a_path_with_a_dot_segment_is_refused_before_the_body_is_read(
    raw_path: bytes,
) -> None:
    # no body message at all: it is refused on the path alone, before anything else happens
    with pytest.raises(BadRequest, match=r"holds a '\.' or '\.\.' segment") as refused:
        await receive_request(scope(raw_path), messages(), 100, Headers(RAW))
    assert refused.value.param == "path" and repr(raw_path.decode()) in refused.value.message


async def test_dots_inside_a_segment_are_read_as_usual() -> None:
    path = b"/v1beta/models/gemini-2.5-flash%3AgenerateContent"
    got = await receive_request(scope(path), messages(piece(b"{}")), 100, Headers(RAW))
    assert got.raw_path == path.decode()


async def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read() -> None:
    headers = Headers([(b"content-length", b"5000")])
    with pytest.raises(PayloadTooLarge, match="has 5000 bytes; the limit is 100"):
        await receive_request(scope(), messages(), 100, headers)


async def test_a_body_that_grows_past_the_limit_is_refused() -> None:
    sent = messages(piece(b"x" * 60, True), piece(b"x" * 60))
    with pytest.raises(PayloadTooLarge, match="over the limit of 100 bytes"):
        await receive_request(scope(), sent, 100, Headers(RAW))
    with pytest.raises(PayloadTooLarge):
        await receive_request(scope(), messages(piece(b"x" * 101)), 100, Headers(RAW))


async def test_a_half_body_is_never_taken_for_a_whole_one() -> None:
    for sent in (
        messages({"type": "http.disconnect"}),
        messages(piece(b'{"a":', True), {"type": "http.disconnect"}),
    ):
        with pytest.raises(ClientClosedRequest):
            await receive_request(scope(), sent, 100, Headers(RAW))
