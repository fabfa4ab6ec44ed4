"""A session's upstream is its own, over real sockets: with --upstream
'http://gw/sessions/{session}/v1?sid={session}', nothing a client sends can put its call under
another session's place at the gateway. A path with a `.` or `..` segment (raw, percent-encoded in
any case, or formed by encoded slashes), a query that names a parameter the template sets, and a
trajectory or session that is not a name are refused with a 400 in the API's own shape, and the
gateway stand-in receives nothing.

The requests go out through http.client, which sends a target exactly as written: httpx would
resolve the dot segments before they left.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, anthropic_text, status

SESSION = {"x-session-affinity": "rollout-1"}
CHAT = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
JSON = {"content-type": "application/json"}
LISTED = status(200, {"object": "list", "data": []})  # what the gateway answers to anything


def send(
    url: str, method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> tuple[int, Any]:
    """`target` on the request line as written; the answer's status and JSON body."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, target, body=body or None, headers={**SESSION, **(headers or {})})
        answer = conn.getresponse()
        return answer.status, orjson.loads(answer.read())
    finally:
        conn.close()


@pytest.fixture
def gateway(upstream: tuple[FakeUpstream, str]) -> Iterator[tuple[FakeUpstream, str]]:
    """The fake upstream as a gateway keyed by session: (the fake, the --upstream template)."""
    fake, upstream_url = upstream
    fake.fallback = LISTED
    yield fake, upstream_url.removesuffix("/v1") + "/sessions/{session}/v1?sid={session}"


@pytest.mark.parametrize(
    "target",
    [
        "/v1/../../victim/v1/models",
        "/v1/%2e%2e/%2E%2E/victim/v1/models",
        "/v1/%2e./%2E%2e/victim/v1/models",
        "/v1/./models",
        "/v1/models/%2e",
        "/v1/x%2F..%2F..%2Fvictim/v1/models",
        "/v1/x%2f%2e%2e%2f%2e%2e%2fvictim/v1/models",
        "/v1/%252e%252e/%252e%252e/victim/v1/models",  # for a gateway that decodes twice
        "/v1/..;/..;/victim/v1/models",  # Tomcat-style: ..;x is .. to it
        "/s/rollout-1/v1/../../victim/v1/models",
    ],
)
def test_a_path_with_a_dot_segment_is_refused_before_anything_is_sent_or_recorded(
    proxy: ProxyFactory, gateway: tuple[FakeUpstream, str], tmp_path: Path, target: str
) -> None:
    fake, template = gateway
    records = tmp_path / "rec"
    with proxy(upstream=template, record_dir=records) as url:
        status, body = send(url, "GET", target)
    assert status == 400, body
    error = body["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "path"
    sent = target.removeprefix("/s/rollout-1")  # the path after the session's prefix
    assert f"{sent!r}" in error["message"] and "'.' or '..'" in error["message"]
    assert fake.requests == []
    assert not records.exists() or list(records.iterdir()) == []


def test_a_dot_segment_in_a_gemini_path_is_refused_in_googles_shape(
    proxy: ProxyFactory, gateway: tuple[FakeUpstream, str]
) -> None:
    fake, template = gateway
    body = orjson.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    target = "/v1beta/models/%2E%2E/%2E%2E/victim/models/gemini-2.5-flash:generateContent"
    with proxy(upstream=template) as url:
        status, answer = send(url, "POST", target, JSON, body)
    assert status == 400
    assert set(answer["error"]) == {"code", "message", "status"}
    assert answer["error"]["status"] == "INVALID_ARGUMENT" and target in answer["error"]["message"]
    assert fake.requests == []


def test_a_path_with_dots_inside_its_segments_still_goes_under_the_sessions_base(
    proxy: ProxyFactory, gateway: tuple[FakeUpstream, str]
) -> None:
    fake, template = gateway
    with proxy(upstream=template) as url:
        status, _ = send(url, "GET", "/v1/files/file-1.txt/...x?limit=2")
    assert status == 200
    [seen] = fake.requests
    assert (seen.path, seen.query) == (
        "/sessions/rollout-1/v1/files/file-1.txt/...x",
        "sid=rollout-1&limit=2",
    )


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("sid=victim", "sid"),
        ("SID=victim", "SID"),
        ("s%69d=victim", "sid"),
        ("limit=1&sid=victim", "sid"),
        ("limit=1;sid=victim", "sid"),  # a gateway that splits on ; too
        ("sid", "sid"),
    ],
)
def test_a_query_that_names_a_parameter_the_template_sets_is_refused(
    proxy: ProxyFactory, gateway: tuple[FakeUpstream, str], tmp_path: Path, query: str, named: str
) -> None:
    fake, template = gateway
    records = tmp_path / "rec"
    with proxy(upstream=template, record_dir=records) as url:
        status, body = send(url, "GET", f"/v1/models?{query}")
    assert status == 400, body
    error = body["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == named
    assert f"query parameter {named!r}" in error["message"]
    assert fake.requests == []
    assert not records.exists() or list(records.iterdir()) == []


def test_a_live_completion_whose_query_names_the_templates_parameter_is_refused_in_its_shape(
    proxy: ProxyFactory, gateway: tuple[FakeUpstream, str]
) -> None:
    fake, template = gateway
    fake.then(anthropic_text("live"))
    body = orjson.dumps(
        {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    )
    with proxy(upstream=template) as url:
        root = url.removesuffix("/v1")
        refused = send(root, "POST", "/v1/messages?beta=true&sid=victim", JSON, body)
        allowed = send(root, "POST", "/v1/messages?beta=true", JSON, body)
    status, answer = refused
    assert status == 400 and answer["type"] == "error", answer
    assert answer["error"]["type"] == "invalid_request_error" and answer["error"]["param"] == "sid"
    assert allowed[0] == 200
    [seen] = fake.requests  # the allowed one alone
    assert (seen.path, seen.query) == ("/sessions/rollout-1/v1/messages", "sid=rollout-1&beta=true")


@pytest.mark.parametrize(
    ("settings", "trajectory"),
    [
        ({"upstream": "/g/{trajectory}/{session}/v1"}, ".."),
        ({"upstream": "/g/{trajectory}/{session}/v1"}, "."),
        ({"upstream": "/v1?t={trajectory}"}, "a&sid=victim"),
        ({"upstream": "/v1", "upstream_header": ("x-rollout: {trajectory}",)}, "a, victim"),
    ],
)
def test_a_trajectory_that_is_not_a_name_fills_no_template(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    settings: dict[str, Any],
    trajectory: str,
) -> None:
    fake, upstream_url = upstream
    fake.fallback = LISTED
    root = upstream_url.removesuffix("/v1")
    settings = {**settings, "upstream": root + settings["upstream"]}
    with proxy(**settings) as url:
        status, body = send(url, "GET", "/v1/models", {"x-replay-trajectory": trajectory})
    assert status == 400, body
    error = body["error"]
    assert error["param"] == "trajectory"
    assert (
        f"the trajectory {trajectory!r}" in error["message"] and "{trajectory}" in error["message"]
    )
    assert fake.requests == []
