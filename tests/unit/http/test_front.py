"""Which path goes where, as the front builds it from the Api table: an API's paths answered (by
name or by form), the paths an API claims forwarded in its dialect, the rest of /v1 forwarded as
"other", /v1/v1 refused with a hint, everything else left to FastAPI (the admin API, the pages)."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.apis import ANTHROPIC, APIS, CHAT, GEMINI, RESPONSES, Api
from proxy.app import create_app
from proxy.config import Settings
from proxy.http.front import Front
from tests.helpers.plain_api import PATH, PLAIN


def front(apis: tuple[Api, ...] = APIS) -> Front:
    return create_app(Settings(), apis=apis)


def api_of(route: Any) -> Api | None:
    assert route is not None
    return route[1]


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/v1/chat/completions", CHAT),
        ("/chat/completions", CHAT),
        ("/v1/responses", RESPONSES),
        ("/v1/messages", ANTHROPIC),
        ("/messages", ANTHROPIC),
        ("/v1beta/models/gemini-2.5-pro:generateContent", GEMINI),
        ("/v1beta/models/gemini-2.5-pro:streamGenerateContent", GEMINI),
        ("/v1/models/gemini-2.5-pro:generateContent", GEMINI),  # by its form, any version
    ],
)
def test_an_apis_paths_are_answered_by_that_api(path: str, api: Api) -> None:
    assert api_of(front().route(path, "POST")) is api


def test_the_paths_an_api_claims_are_forwarded_as_its_own() -> None:
    routes = front()
    for path in ("/v1beta/models", "/v1alpha/files", "/v1/models/g:countTokens"):
        for method in ("GET", "POST"):
            claimed = api_of(routes.route(path, method))
            assert claimed is GEMINI, (method, path)
            # so its key and version go Google's way
            assert claimed.upstream.keeps_version and claimed.upstream.key_query == "key"


def test_the_rest_of_v1_is_forwarded_as_other_and_the_rest_is_fastapis() -> None:
    routes = front()
    assert routes.route("/v1/embeddings", "POST") is routes.other
    assert routes.route("/v1/chat/completions", "GET") is routes.other  # not a completion
    assert api_of(routes.route("/v1/models", "GET")) is None
    for path in ("/replay/sessions", "/healthz", "/", "/chat/completions/x", "/v1"):
        assert routes.route(path, "POST") is None, path


def test_v1_twice_is_no_route_and_its_hint_names_who_adds_v1() -> None:
    routes = front()
    assert routes.route("/v1/v1/messages", "POST") is None
    error, meant = routes._doubled("/v1/v1/messages")
    assert meant is ANTHROPIC and "the Anthropic SDK and Claude Code add /v1" in error.message
    error, meant = routes._doubled("/v1/v1/chat/completions")
    assert meant is CHAT and "this client adds /v1" in error.message
    error, meant = routes._doubled("/v1/v1/embeddings")
    assert meant is None and error.status == 404


def test_a_row_added_to_the_table_is_routed_and_nothing_else_changes() -> None:
    plain = front((*APIS, PLAIN))
    assert api_of(plain.route(PATH, "POST")) is PLAIN
    built_in = front()
    assert built_in.route(PATH, "POST") is built_in.other  # without the row: forwarded as other
    for path in ("/v1/chat/completions", "/v1beta/models/g:generateContent"):
        assert api_of(plain.route(path, "POST")) is api_of(built_in.route(path, "POST"))
