"""An error the proxy makes, in the shape of the API it answers (the row's error_body): what each
API's own clients parse, with the status, the message and the proxy's replay details kept."""

from __future__ import annotations

import orjson

from proxy.apis import ANTHROPIC, APIS, CHAT, GEMINI, RESPONSES
from proxy.errors import InjectedFault, NotFound, ReplayDiverged, error_response


def shaped(api_name: str, error: Exception) -> dict[str, object]:
    api = next(a for a in APIS if a.name == api_name)
    assert isinstance(error, NotFound | ReplayDiverged | InjectedFault)
    response = error_response(error, shape=api.error_body)
    assert response.status_code == error.status
    return orjson.loads(bytes(response.body))


def test_openai_shaped_on_chat_and_responses() -> None:
    for api in (CHAT, RESPONSES):
        assert api.error_body is None
        body = shaped(api.name, NotFound("no such session"))
        assert body == {
            "error": {
                "message": "no such session",
                "type": "invalid_request_error",
                "param": None,
                "code": "not_found",
            }
        }


def test_anthropic_shaped_on_messages() -> None:
    body = shaped(ANTHROPIC.name, NotFound("no such session"))
    assert body["type"] == "error"
    inner = body["error"]
    assert isinstance(inner, dict)
    assert (inner["type"], inner["message"]) == ("not_found_error", "no such session")
    limited = shaped(ANTHROPIC.name, InjectedFault(429, "slow down"))["error"]
    assert isinstance(limited, dict) and limited["type"] == "rate_limit_error"


def test_google_shaped_on_gemini_with_the_replay_details_kept() -> None:
    diverged = ReplayDiverged("diverged at step 2", session="s1", turn=2)
    body = shaped(GEMINI.name, diverged)
    inner = body["error"]
    assert isinstance(inner, dict)
    assert (inner["code"], inner["status"]) == (404, "NOT_FOUND")
    assert inner["message"] == "diverged at step 2"
    assert inner["replay"] == {"session": "s1", "turn": 2}
    unavailable = shaped(GEMINI.name, InjectedFault(503, "later"))["error"]
    assert isinstance(unavailable, dict) and unavailable["status"] == "UNAVAILABLE"
