"""What crosses to the upstream and back: hop-by-hop headers stay, the proxy's own x-replay-*
headers stay, the client's credentials are swapped for --upstream-api-key, and the Via mark goes
out on every forwarded request."""

from __future__ import annotations

import pytest

from proxy.apis.keys import PLAIN
from proxy.upstream.headers import (
    answer_headers,
    came_back,
    query_key,
    request_headers,
    swap_query_key,
    via,
)
from tests.helpers.captures import CAPTURES, captured, headers

CLIENT_KEY = "sk-client-0123456789abcdef"
PROXY_KEY = "sk-proxy-fedcba9876543210"

# the headers the openai SDK sends (tests/fixtures/captures/openai_sdk.jsonl), as ASGI gives them
OPENAI_SDK = [
    (b"host", b"127.0.0.1:8080"),
    (b"accept-encoding", b"gzip, deflate"),
    (b"connection", b"keep-alive"),
    (b"accept", b"application/json"),
    (b"content-type", b"application/json"),
    (b"user-agent", b"OpenAI/Python 1.82.0"),
    (b"x-stainless-lang", b"python"),
    (b"authorization", b"Bearer " + CLIENT_KEY.encode()),
    (b"content-length", b"123"),
    (b"x-session-affinity", b"ses_1"),
]


def names(headers: list[tuple[str, str]]) -> list[str]:
    return [name for name, _ in headers]


def test_hop_by_hop_host_and_length_never_cross_and_the_rest_keeps_its_order() -> None:
    sent = request_headers(
        [
            *OPENAI_SDK,
            (b"te", b"trailers"),
            (b"upgrade", b"h2c"),
            (b"proxy-authorization", b"Basic c2VjcmV0"),
            (b"transfer-encoding", b"chunked"),
            (b"expect", b"100-continue"),
        ],
        api_key=None,
        dialect=PLAIN,
    )
    assert names(sent) == [
        "accept-encoding",
        "accept",
        "content-type",
        "user-agent",
        "x-stainless-lang",
        "authorization",
        "x-session-affinity",
    ]


def test_the_headers_the_connection_header_names_stay_too() -> None:
    sent = request_headers(
        [
            (b"connection", b"keep-alive, X-Private-Hop"),
            (b"connection", b"x-other-hop"),
            (b"x-private-hop", b"1"),
            (b"x-other-hop", b"2"),
            (b"x-kept", b"3"),
        ],
        api_key=None,
        dialect=PLAIN,
    )
    assert sent == [("x-kept", "3")]


def test_the_proxys_own_headers_stay_here() -> None:
    sent = request_headers(
        [
            (b"x-replay-trajectory", b"run"),
            (b"x-replay-turns", b"2"),
            (b"x-replayed", b"kept: not the prefix"),
            (b"content-type", b"application/json"),
        ],
        api_key=None,
        dialect=PLAIN,
    )
    assert sent == [("x-replayed", "kept: not the prefix"), ("content-type", "application/json")]


def test_without_a_proxy_key_the_clients_credentials_go_on_as_sent() -> None:
    sent = dict(request_headers(OPENAI_SDK, api_key=None, dialect=PLAIN))
    assert sent["authorization"] == f"Bearer {CLIENT_KEY}"


def test_with_a_proxy_key_the_clients_bearer_is_replaced_and_never_sent() -> None:
    sent = request_headers(
        [*OPENAI_SDK, (b"api-key", CLIENT_KEY.encode())], api_key=PROXY_KEY, dialect=PLAIN
    )
    assert ("authorization", f"Bearer {PROXY_KEY}") in sent
    assert names(sent).count("authorization") == 1
    assert "api-key" not in names(sent)
    assert all(CLIENT_KEY not in value for _, value in sent)


@pytest.mark.parametrize("client", sorted(p.stem for p in CAPTURES.glob("*.jsonl")))
def test_no_captured_client_credential_crosses_when_the_proxy_has_a_key(client: str) -> None:
    """Every request real harnesses sent, as ASGI gives it (names in lower case)."""
    credentials = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
    for capture in captured(client):
        asgi = [(k.encode(), v.encode()) for k, v in headers(capture).items()]
        secrets = {
            v.removeprefix("Bearer ") for k, v in headers(capture).items() if k in credentials
        }
        sent = request_headers(asgi, api_key=PROXY_KEY, dialect=PLAIN)
        assert not [v for _, v in sent for s in secrets if s in v], capture["seq"]
        assert {n for n, _ in sent} & {"host", "connection", "content-length"} == set()
        assert any(PROXY_KEY in v for n, v in sent if n in credentials)


def test_an_anthropic_client_keeps_its_x_api_key_way() -> None:
    client = [(b"x-api-key", CLIENT_KEY.encode()), (b"anthropic-version", b"2023-06-01")]
    sent = request_headers(client, api_key=PROXY_KEY, dialect=PLAIN)
    assert sent == [("anthropic-version", "2023-06-01"), ("x-api-key", PROXY_KEY)]


def test_a_client_sending_both_ways_gets_both_with_the_proxys_key() -> None:
    client = [(b"x-api-key", CLIENT_KEY.encode()), (b"authorization", b"Bearer " + b"other")]
    sent = request_headers(client, api_key=PROXY_KEY, dialect=PLAIN)
    assert sorted(sent) == [("authorization", f"Bearer {PROXY_KEY}"), ("x-api-key", PROXY_KEY)]


def test_a_client_with_no_credentials_gets_the_proxys_as_a_bearer() -> None:
    sent = request_headers(
        [(b"content-type", b"application/json")], api_key=PROXY_KEY, dialect=PLAIN
    )
    assert sent == [("content-type", "application/json"), ("authorization", f"Bearer {PROXY_KEY}")]


def test_identity_asks_for_an_uncompressed_answer_in_place_of_the_clients() -> None:
    sent = request_headers(OPENAI_SDK, api_key=None, identity=True, dialect=PLAIN)
    assert [v for n, v in sent if n == "accept-encoding"] == ["identity"]


def test_the_via_mark_is_added_on_a_line_of_its_own() -> None:
    mark = via("abc123")
    assert mark == b"1.1 replay-proxy-abc123"
    sent = request_headers([(b"via", b"1.1 corp-gateway")], api_key=None, mark=mark, dialect=PLAIN)
    assert sent == [("via", "1.1 corp-gateway"), ("via", "1.1 replay-proxy-abc123")]


def test_a_request_that_carries_our_mark_came_back_and_another_proxys_did_not() -> None:
    mark = via("abc123")
    assert came_back([(b"via", b"1.1 corp, 1.1 replay-proxy-abc123")], mark)
    assert not came_back([(b"via", b"1.1 replay-proxy-other")], mark)
    assert not came_back([(b"x-via", mark)], mark)
    assert not came_back([], mark)


def test_header_bytes_cross_as_they_came() -> None:
    sent = request_headers([(b"x-note", "café".encode())], api_key=None, dialect=PLAIN)
    assert sent[0][1].encode("latin-1") == "café".encode()


def test_a_query_key_is_swapped_and_percent_encoded_and_nothing_else_changes() -> None:
    assert swap_query_key("alt=sse&key=AIzaClient", "new/key+1") == "alt=sse&key=new%2Fkey%2B1"
    assert swap_query_key("alt=sse", "k") == "alt=sse"
    assert swap_query_key("monkey=1&key=a", "b") == "monkey=1&key=b"


def test_the_query_key_is_read_back_decoded_for_scrubbing() -> None:
    assert query_key("alt=sse&key=AIza%2Fsecret") == "AIza/secret"
    assert query_key("key=") is None
    assert query_key("monkey=banana") is None


def test_the_answer_loses_its_hop_by_hop_headers_and_date_and_keeps_names_as_written() -> None:
    kept, content_type = answer_headers(
        [
            (b"Content-Type", b"text/event-stream; charset=utf-8"),
            (b"Date", b"Mon, 01 Jan 2024 00:00:00 GMT"),
            (b"Connection", b"keep-alive, X-Hop"),
            (b"X-Hop", b"1"),
            (b"Transfer-Encoding", b"chunked"),
            (b"x-request-id", b"req_1"),
            (b"content-type", b"application/json"),
        ]
    )
    assert kept == [
        (b"Content-Type", b"text/event-stream; charset=utf-8"),
        (b"x-request-id", b"req_1"),
        (b"content-type", b"application/json"),
    ]
    assert content_type == "text/event-stream; charset=utf-8"  # the first one
    assert answer_headers([(b"x-a", b"1")]) == ([(b"x-a", b"1")], "")
