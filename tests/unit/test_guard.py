"""The guard, from headers alone: no foreign web page drives the proxy, API bodies only as JSON,
and a Host a rebinding page could send refused where credentials or the admin API are at stake."""

from __future__ import annotations

import pytest

from proxy.errors import CrossSiteRefused, Unauthorized, UnsupportedMediaType
from proxy.guard import Guard, host_of, is_json

JSON_POST = {"content-type": "application/json", "content-length": "42"}


@pytest.mark.parametrize(
    ("authority", "host"),
    [
        ("127.0.0.1:8080", "127.0.0.1"),
        ("LocalHost", "localhost"),
        ("[::1]:8080", "::1"),
        ("[::1", "::1"),
        ("::1", "::1"),
        (" proxy.corp:443 ", "proxy.corp"),
    ],
)
def test_the_host_of_an_authority(authority: str, host: str) -> None:
    assert host_of(authority) == host


@pytest.mark.parametrize(
    ("kind", "json"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/vnd.api+json", True),
        ("text/plain", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        ("text/json", False),
    ],
)
def test_which_content_types_are_json(kind: str, json: bool) -> None:
    assert is_json(kind) is json


def test_a_harness_sends_json_and_no_origin_and_passes() -> None:
    Guard().api({**JSON_POST, "host": "llm.internal.corp"})
    Guard().api({"host": "anything"})  # a GET with no body


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:3000", "http://localhost:5173", "https://app.localhost", "http://[::1]:80"],
)
def test_a_local_page_may_call_the_proxy(origin: str) -> None:
    Guard().api({**JSON_POST, "origin": origin})


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://192.168.1.5", "file://", "ftp://localhost"]
)
def test_a_page_from_anywhere_else_is_refused(origin: str) -> None:
    with pytest.raises(CrossSiteRefused, match="another site must not drive the proxy") as refused:
        Guard().api({**JSON_POST, "origin": origin})
    assert refused.value.param == "origin"


def test_a_cross_site_fetch_without_an_origin_is_refused() -> None:
    with pytest.raises(CrossSiteRefused, match="Sec-Fetch-Site: cross-site"):
        Guard().api({**JSON_POST, "sec-fetch-site": "cross-site"})
    Guard().api({**JSON_POST, "sec-fetch-site": "same-origin"})


def test_allowed_hosts_take_names_and_suffixes() -> None:
    guard = Guard(["tools.corp", "*.dev.corp", " "])
    guard.api({**JSON_POST, "origin": "https://tools.corp"})
    guard.api({**JSON_POST, "origin": "https://a.dev.corp"})
    with pytest.raises(CrossSiteRefused):
        guard.api({**JSON_POST, "origin": "https://tools.corp.evil.example"})
    Guard(["*"]).api({**JSON_POST, "origin": "https://anywhere.example"})


@pytest.mark.parametrize("kind", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_json_is_refused(kind: str | None) -> None:
    headers = (
        {"content-length": "10"} if kind is None else {"content-length": "10", "content-type": kind}
    )
    with pytest.raises(UnsupportedMediaType, match="takes only JSON bodies") as refused:
        Guard().api(headers)
    assert refused.value.param == "content-type"


def test_a_chunked_body_needs_json_too() -> None:
    with pytest.raises(UnsupportedMediaType):
        Guard().api({"transfer-encoding": "chunked", "content-type": "text/plain"})
    Guard().api({"content-length": "0", "content-type": "text/plain"})  # no body at all


def test_with_the_operators_key_a_rebindable_host_is_refused() -> None:
    guard = Guard(upstream_key=True)
    with pytest.raises(CrossSiteRefused, match="sends --upstream-api-key upstream") as refused:
        guard.api({**JSON_POST, "host": "rebind.attacker.example:8080"})
    assert "--allowed-host rebind.attacker.example" in refused.value.message
    assert "--admin-token" not in refused.value.message
    for host in ("127.0.0.1:8080", "[::1]:8080", "localhost:8080", "10.0.0.7"):
        guard.api({**JSON_POST, "host": host})
    guard.api(JSON_POST)  # no Host: not a browser


def test_without_a_token_the_admin_api_answers_only_local_hosts() -> None:
    with pytest.raises(CrossSiteRefused, match="or set --admin-token"):
        Guard().admin({"host": "rebind.attacker.example"})
    Guard().admin({"host": "127.0.0.1:8080"})
    Guard(["proxy.corp"]).admin({"host": "proxy.corp:8080"})
    Guard(admin_token=True).admin({"host": "rebind.attacker.example"})


def test_a_link_from_another_site_may_open_the_status_page_but_not_the_api() -> None:
    link = {"origin": "https://evil.example", "sec-fetch-mode": "navigate", "host": "127.0.0.1"}
    Guard().admin(link, page=True)
    with pytest.raises(CrossSiteRefused, match="the admin API refused"):
        Guard().admin(link)
    with pytest.raises(CrossSiteRefused):
        Guard().admin({**link, "sec-fetch-mode": "cors"}, page=True)


def test_a_host_judged_once_is_judged_the_same_again() -> None:
    guard = Guard(upstream_key=True)
    for _ in range(2):
        with pytest.raises(CrossSiteRefused):
            guard.api({"host": "rebind.attacker.example"})
        guard.api({"host": "127.0.0.1"})


def test_a_front_cannot_hide_the_name_a_page_asked_for() -> None:
    """A reverse proxy may put 127.0.0.1 in Host and the browser's name elsewhere: every name a
    request carries is judged."""
    guard = Guard(upstream_key=True)
    for headers in (
        {"host": "127.0.0.1:8080", "x-forwarded-host": "rebind.attacker.example"},
        {"host": "127.0.0.1:8080", "x-forwarded-host": "127.0.0.1, rebind.attacker.example"},
        {"host": "127.0.0.1:8080", "forwarded": 'for=1.2.3.4;host="rebind.attacker.example"'},
        {"host": "127.0.0.1:8080", "forwarded": "for=1.2.3.4, host=rebind.attacker.example"},
    ):
        with pytest.raises(CrossSiteRefused, match=r"rebind\.attacker\.example"):
            guard.api({**JSON_POST, **headers})
    guard.api({**JSON_POST, "host": "127.0.0.1:8080", "x-forwarded-host": "localhost:8080"})


@pytest.mark.parametrize(
    "header", ["x-forwarded-for", "forwarded", "x-real-ip", "x-forwarded-host"]
)
def test_a_token_less_admin_api_refuses_what_came_through_a_front(header: str) -> None:
    value = "for=10.0.0.9" if header == "forwarded" else "127.0.0.1"
    with pytest.raises(CrossSiteRefused, match="reverse proxy") as refused:
        Guard().admin({"host": "127.0.0.1:8080", header: value})
    assert refused.value.param == header
    Guard(admin_token=True).admin({"host": "127.0.0.1:8080", header: value})  # the token decides


def test_choosing_a_script_by_request_needs_the_token_when_there_is_one() -> None:
    guard = Guard(binding_token="binding-token-4Hx9Qm2Zp7")
    guard.binding({}, named=False)  # a request that chooses nothing
    for headers, named in (
        ({"x-replay-trajectory": "run"}, False),
        ({"x-replay-turns": "3"}, False),
        ({}, True),
        ({"x-replay-trajectory": "run", "x-replay-token": "wrong"}, False),
    ):
        with pytest.raises(Unauthorized, match="x-replay-token") as refused:
            guard.binding(headers, named=named)
        assert refused.value.param == "x-replay-token"
    guard.binding(
        {"x-replay-trajectory": "run", "x-replay-token": "binding-token-4Hx9Qm2Zp7"}, named=True
    )
    Guard().binding({"x-replay-trajectory": "run"}, named=True)  # no token: open
