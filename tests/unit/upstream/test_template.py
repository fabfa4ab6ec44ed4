"""An upstream per session: {session} and {trajectory} filled into --upstream's path and query
(percent-encoded) and into --upstream-header values, never into the host; each value a name,
checked as it fills; no path with a "." or ".." segment, and no client query naming a parameter
the template sets."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from proxy.errors import BadRequest
from proxy.upstream.template import (
    Target,
    check,
    check_url,
    dot_segment,
    fields,
    fill,
    parse_header,
    refuse_dot_segments,
)

VALUES = {"session": "rollout-7", "trajectory": "swe:task.1"}


def test_the_fields_of_a_template_are_found() -> None:
    assert fields("/sessions/{session}/v1?t={trajectory}") == {"session", "trajectory"}
    assert fields("/v1") == set()


def test_only_session_and_trajectory_are_fields() -> None:
    check("/sessions/{session}/t/{trajectory}/v1", "--upstream")
    with pytest.raises(ValueError, match=r"--upstream: \{rollout\} is not a field"):
        check("/sessions/{rollout}/v1", "--upstream")


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (lambda: check_url("http://x/{bad}/v1"), "'http://x/{bad}/v1': {bad} is not a field"),
        (lambda: check_url("http://x/{session"), "'http://x/{session': a brace that opens no"),
        (lambda: check_url("http://{session}.x/v1"), "'http://{session}.x/v1': fields like"),
        (lambda: parse_header("nocolon"), "'nocolon': expected 'Name: value'"),
        (lambda: parse_header("X-A: a\tb"), "'X-A: a\\tb': the value holds a control"),
        (lambda: parse_header("X-A: {user}"), "'X-A: {user}': {user} is not a field"),
    ],
)
def test_a_start_up_message_names_the_value_and_leaves_the_flag_to_its_reporter(
    bad: Callable[[], object], says: str
) -> None:
    # serve.py puts "--upstream: " (or the environment variable) before it: said once
    with pytest.raises(ValueError) as refused:
        bad()
    message = str(refused.value)
    assert message.startswith(says) and "--upstream" not in message


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


def test_url_values_are_percent_encoded() -> None:
    assert fill("/s/{trajectory}/v1", VALUES, encode=True) == "/s/swe%3Atask.1/v1"
    assert (
        fill("/s/{session}/v1?id={session}", VALUES, encode=True) == "/s/rollout-7/v1?id=rollout-7"
    )


@pytest.mark.parametrize("field", ["session", "trajectory"])
@pytest.mark.parametrize(
    "value", ["..", ".", "a/b", "a?b=1", "a&sid=victim", "a b", "a\r\nX-Evil: 1", "é", "x" * 201]
)
@pytest.mark.parametrize("encode", [True, False])
def test_a_value_that_is_not_a_name_fills_no_template(field: str, value: str, encode: bool) -> None:
    # percent-encoding leaves ".." as it is (dots are unreserved), and a header has no encoding
    with pytest.raises(BadRequest) as refused:
        fill(f"/g/{{{field}}}/v1", {field: value}, encode=encode)
    error = refused.value
    assert error.status == 400 and error.param == field
    assert f"the {field} {value[:80]!r} cannot fill {{{field}}}" in error.message
    assert "never '.' or '..'" in error.message


def test_a_target_checks_its_values_for_the_url_and_the_headers_alike() -> None:
    target = Target(path="/v1", query="", headers=(("x-rollout", "{trajectory}"),))
    with pytest.raises(BadRequest, match=r"the trajectory '\.\.' cannot fill \{trajectory\}"):
        target.header_lines({"session": "s", "trajectory": ".."})
    with pytest.raises(BadRequest, match="the session 'a b'"):
        Target(path="/s/{session}", query="").base({"session": "a b"})


def test_a_missing_value_fills_in_empty() -> None:
    assert fill("/s/{session}/t/{trajectory}", {"session": "x"}, encode=True) == "/s/x/t/"


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


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("sid=victim", "sid"),
        ("SID=victim", "SID"),  # some servers read names in any case
        ("s%69d=victim", "sid"),
        ("sid", "sid"),
        ("a=1&sid=x", "sid"),
        ("a=1;sid=x", "sid"),  # some servers split on ; too
        ("t+=x", "t "),
    ],
)
def test_a_client_query_may_not_name_a_parameter_the_template_sets(query: str, named: str) -> None:
    target = Target(path="/s/{session}/v1", query="sid={session}&t%20=1")
    with pytest.raises(BadRequest) as refused:
        target.own(query)
    assert refused.value.param == named
    assert refused.value.message.startswith(
        f"the query parameter {named!r} is set by the proxy for each session"
    )


@pytest.mark.parametrize("query", ["", "limit=2", "sidx=1&xsid=2", "a=sid", "=sid"])
def test_a_client_query_with_other_parameters_is_its_own(query: str) -> None:
    Target(path="/s/{session}/v1", query="sid={session}").own(query)
    Target(path="/s/{session}/v1", query="").own("sid=1")  # the template sets none


@pytest.mark.parametrize(
    "path",
    [
        "/v1/..",
        "/v1/../../victim/v1/models",
        "/v1/./models",
        "..",
        "/v1/%2e%2e/x",
        "/v1/%2E%2E/x",
        "/v1/%2e./x",
        "/v1/.%2E/x",
        "/v1/%2e/x",
        "/v1/x%2F..%2Fy",
        "/v1/x%2f%2e%2e%2fy",
        "/v1/%252e%252e/x",
        "/v1/..;/x",
        "/v1/.;jsessionid=1/x",
        "/v1/..\\x",
        "/v1/x%5C..%5Cy",
    ],
)
def test_a_dot_segment_is_found_raw_or_percent_encoded(path: str) -> None:
    assert dot_segment(path)
    with pytest.raises(BadRequest, match=r"holds a '\.' or '\.\.' segment") as refused:
        refuse_dot_segments(path)
    assert refused.value.param == "path" and repr(path) in refused.value.message


@pytest.mark.parametrize(
    "path",
    [
        "/v1/chat/completions",
        "/v1beta/models/gemini-2.5-flash:generateContent",
        "/v1/files/file-1.txt",
        "/v1/a..b/...",
        "/v1/.well-known/x",
        "/v1/models/%3Amodel%20name",
        "/v1/x%2Fy",
        "",
    ],
)
def test_dots_and_encodings_inside_a_segment_are_no_dot_segment(path: str) -> None:
    assert not dot_segment(path)
    refuse_dot_segments(path)
