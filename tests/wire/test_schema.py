"""schemathesis against the app's own OpenAPI schema, over real sockets (the proxy under
uvicorn): whatever it sends, never a 500, and every error is OpenAI-shaped (Anthropic-shaped on
/v1/messages)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.app import create_app
from proxy.config import Settings
from proxy.testing import serving
from tests.conftest import ROOT

TRAJECTORY = ROOT / "examples" / "greeting.json"


@pytest.fixture(scope="module")
def api_schema() -> Iterator[Any]:
    # an upstream nothing listens on: forwarded requests get the proxy's own 502
    app = create_app(Settings(trajectory=(TRAJECTORY,), upstream="http://127.0.0.1:9/v1"))
    with serving(app) as url:
        yield schemathesis.openapi.from_url(url + "/openapi.json")


def test_no_input_gets_a_500(api_schema: Any) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert {op.path for op in operations} >= {
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/replay/sessions/{session}",
    }
    strategy = st.sampled_from(operations).flatmap(lambda op: op.as_strategy())

    @settings(
        max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(strategy)
    def check(case: Any) -> None:
        response = case.call()
        assert response.status_code < 500 or response.status_code == 502, (
            case.method,
            case.path,
            response.text,
        )
        if response.status_code >= 400:
            body = json.loads(response.text)
            if case.path.startswith("/model/"):  # Bedrock's own shape: {"message": ...}
                assert isinstance(body["message"], str) and body["message"]
                return
            assert isinstance(body["error"]["message"], str) and body["error"]["message"]
            if case.path.endswith("/messages"):
                assert body["type"] == "error"

    check()
