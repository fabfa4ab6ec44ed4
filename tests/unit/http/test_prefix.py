"""A session (and a trajectory) named in the base URL, /s/{session}/v1 and /s/{s}/t/{name}/v1:
taken off the path, checked as names, an encoded slash kept inside its segment."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from proxy.errors import BadRequest
from proxy.http.prefix import Named, split


def named(raw: str) -> Named:
    return split(unquote(raw), raw.encode())


def test_the_session_is_taken_off_and_the_rest_is_the_api_path() -> None:
    assert named("/s/rollout-7/v1/chat/completions") == Named(
        "rollout-7", None, "/v1/chat/completions", b"/v1/chat/completions"
    )


def test_a_trajectory_may_follow_the_session() -> None:
    found = named("/s/ses_1/t/swe:task.1/v1/responses")
    assert (found.session, found.trajectory, found.path) == ("ses_1", "swe:task.1", "/v1/responses")


def test_the_names_are_percent_decoded_and_the_raw_rest_is_kept() -> None:
    found = named("/s/ses%3A1/v1beta/models/gemini%2Dpro:generateContent")
    assert found.session == "ses:1"
    assert found.path == "/v1beta/models/gemini-pro:generateContent"
    assert found.raw_path == b"/v1beta/models/gemini%2Dpro:generateContent"


@pytest.mark.parametrize(
    "raw",
    [
        "/s/a%2Fb/v1/chat/completions",  # an encoded slash stays in its segment: no name
        "/s/%2E%2E/v1/chat/completions",
        "/s/has%20space/v1/chat/completions",
        "/s//v1/chat/completions",
        "/s/ses_1/t/..%2Fetc/v1/chat/completions",
    ],
)
def test_a_name_that_is_no_name_is_refused(raw: str) -> None:
    with pytest.raises(BadRequest, match=r"is not a valid (session id|trajectory name)") as refused:
        named(raw)
    assert refused.value.param == "path"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("/s/ses_1", "must be followed by the API's path"),
        ("/s/ses_1/", "must be followed by the API's path"),
        ("/s/ses_1/t/run", "the trajectory must be followed"),
        ("/s/ses_1/t/run/", "the trajectory must be followed"),
    ],
)
def test_a_prefix_with_nothing_after_it_is_refused(raw: str, reason: str) -> None:
    with pytest.raises(BadRequest, match=reason):
        named(raw)


def test_a_name_of_two_hundred_characters_is_the_longest() -> None:
    assert named(f"/s/{'a' * 200}/v1/models").session == "a" * 200
    with pytest.raises(BadRequest):
        named(f"/s/{'a' * 201}/v1/models")


def test_the_error_quotes_a_bounded_part_of_the_path() -> None:
    with pytest.raises(BadRequest) as refused:
        named("/s/" + "%20" * 500 + "/v1/models")
    assert len(refused.value.message) < 400
