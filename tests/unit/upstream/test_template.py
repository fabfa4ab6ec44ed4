"""An upstream per session: {session} and {trajectory} filled into --upstream's path and query
(percent-encoded) and into --upstream-header values, never into the host."""

from __future__ import annotations

import pytest

from proxy.upstream.template import Target, check, check_url, fields, fill, parse_header

VALUES = {"session": "rollout-7", "trajectory": "swe:task.1"}


def test_the_fields_of_a_template_are_found() -> None:
    assert fields("/sessions/{session}/v1?t={trajectory}") == {"session", "trajectory"}
    assert fields("/v1") == set()


def test_only_session_and_trajectory_are_fields() -> None:
    check("/sessions/{session}/t/{trajectory}/v1", "--upstream")
    with pytest.raises(ValueError, match=r"--upstream: \{rollout\} is not a field"):
        check("/sessions/{rollout}/v1", "--upstream")


@pytest.mark.parametrize("text", ["/s/{session/v1", "/s/session}/v1", "/s/{{session}}/v1"])
def test_a_brace_that_opens_no_field_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="a brace that opens no field"):
        check(text, "--upstream")


@pytest.mark.parametrize(
    "url",
    [
        "http://{session}.gateway.local/v1",
        "http://gateway.local:{session}/v1",
        "http://{trajectory}@gateway.local/v1",
    ],
)
def test_a_field_never_stands_in_the_host(url: str) -> None:
    with pytest.raises(ValueError, match="never in its host"):
        check_url(url)


def test_a_field_in_the_path_or_query_is_fine() -> None:
    check_url("http://gateway.local:8000/sessions/{session}/v1?traj={trajectory}")


def test_url_values_are_percent_encoded_so_they_add_no_segment_or_parameter() -> None:
    values = {"session": "a/b?c=1&d#e f", "trajectory": "t"}
    assert fill("/s/{session}/v1", values, encode=True) == "/s/a%2Fb%3Fc%3D1%26d%23e%20f/v1"
    assert fill("/s/{trajectory}/v1", VALUES, encode=True) == "/s/swe%3Atask.1/v1"


def test_a_missing_value_fills_in_empty() -> None:
    assert fill("/s/{session}/t/{trajectory}", {"session": "x"}, encode=True) == "/s/x/t/"


def test_header_values_lose_control_characters() -> None:
    assert fill("id {session}", {"session": "a\r\nX-Evil: 1"}, encode=False) == "id aX-Evil: 1"


def test_an_upstream_header_spec_is_parsed_to_a_lower_case_name_and_a_template() -> None:
    assert parse_header("X-Session-Id: {session}") == ("x-session-id", "{session}")
    assert parse_header("  X-Run :  run/{trajectory}  ") == ("x-run", "run/{trajectory}")


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("no colon here", "expected 'Name: value'"),
        ("Bad Name: v", "expected 'Name: value'"),
        (": value", "expected 'Name: value'"),
        ("X-A: one\ttwo", "control character"),
        ("X-A: {user}", r"\{user\} is not a field"),
    ],
)
def test_a_bad_upstream_header_says_why(spec: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_header(spec)


def test_a_target_fills_its_path_query_and_headers_per_session() -> None:
    target = Target(
        path="/sessions/{session}/v1",
        query="traj={trajectory}",
        headers=(("x-session-id", "{session}"), ("x-static", "1")),
    )
    assert target.base(VALUES) == ("/sessions/rollout-7/v1", "traj=swe%3Atask.1")
    assert target.header_lines(VALUES) == [("x-session-id", "rollout-7"), ("x-static", "1")]
    other = target.base({"session": "rollout-8", "trajectory": "t"})
    assert other == ("/sessions/rollout-8/v1", "traj=t")
