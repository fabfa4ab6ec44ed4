"""Where a request goes under the upstream's base URL (Upstream.url, no socket): the path as the
caller sent it under the base path, and, for an upstream per session, the session's base path,
query and values, with what could move the call to another session's place refused there, so
that no caller can forget it."""

from __future__ import annotations

import pytest

from proxy.apis import GEMINI
from proxy.errors import BadRequest
from proxy.upstream.client import Upstream

GATEWAY = "http://gw:9000/sessions/{session}/v1?sid={session}"
VALUES = {"session": "rollout-1", "trajectory": "fix-1"}


def test_a_session_goes_under_its_own_base_path_and_query() -> None:
    url = Upstream(GATEWAY).url("/v1/chat/completions", "limit=2", VALUES)
    assert str(url) == "http://gw:9000/sessions/rollout-1/v1/chat/completions?sid=rollout-1&limit=2"
    gemini = Upstream(GATEWAY).url(
        "/v1beta/models/g-2.5:generateContent", "", VALUES, GEMINI.upstream
    )
    assert (
        str(gemini)
        == "http://gw:9000/sessions/rollout-1/v1beta/models/g-2.5:generateContent?sid=rollout-1"
    )


@pytest.mark.parametrize("base", [GATEWAY, "http://gw:9000/v1"])
@pytest.mark.parametrize(
    "raw_path", ["/v1/../../victim/v1/models", "/v1/%2E%2e/x", "/v1/x%2F..%2Fy", "/v1/./x"]
)
def test_no_path_with_a_dot_segment_is_put_under_any_base_path(base: str, raw_path: str) -> None:
    with pytest.raises(BadRequest, match=r"holds a '\.' or '\.\.' segment") as refused:
        Upstream(base).url(raw_path, "", VALUES)
    assert refused.value.param == "path"


def test_a_query_naming_the_templates_parameter_is_refused_and_others_are_kept() -> None:
    upstream = Upstream(GATEWAY)
    with pytest.raises(BadRequest, match="the query parameter 'sid' is set by the proxy"):
        upstream.url("/v1/models", "limit=2&sid=victim", VALUES)
    # an upstream whose query holds no parameter of its own leaves the client's alone
    plain = Upstream("http://gw:9000/sessions/{session}/v1")
    assert str(plain.url("/v1/models", "sid=x", VALUES)).endswith("/rollout-1/v1/models?sid=x")


def test_a_value_that_is_not_a_name_is_refused_where_the_url_is_made() -> None:
    upstream = Upstream("http://gw:9000/g/{trajectory}/{session}/v1")
    with pytest.raises(BadRequest, match=r"the trajectory '\.\.' cannot fill \{trajectory\}"):
        upstream.url("/v1/models", "", {"session": "s", "trajectory": ".."})
    with pytest.raises(BadRequest, match="the session 'a/b'"):
        upstream.where({"session": "a/b", "trajectory": ""})
