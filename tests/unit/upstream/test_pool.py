"""What the pool reads from the environment once: which forward proxy an upstream goes through,
and URLs shown without their user:password."""

from __future__ import annotations

import pytest

from proxy.upstream.pool import display, forward_proxy

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:s3cret-pass@proxy.corp:3128/", "https://proxy.corp:3128/"),
        ("http://token@gateway.local/v1", "http://gateway.local/v1"),
        ("https://api.openai.com/v1", "https://api.openai.com/v1"),
        ("http://u:p@[::1]:8080/v1", "http://[::1]:8080/v1"),
        ("http://u:p@[::1]/v1", "http://[::1]/v1"),
    ],
)
def test_a_url_is_displayed_without_its_credentials(url: str, shown: str) -> None:
    assert display(url) == shown
    assert "s3cret" not in display(url) and "@" not in display(url)


def test_display_drops_the_query_too() -> None:
    """A ?key= holds a credential as often as a user:password does."""
    assert display("https://gen.googleapis.com/v1beta?key=AIzaSecret") == (
        "https://gen.googleapis.com/v1beta"
    )


def test_no_forward_proxy_without_the_environment() -> None:
    assert forward_proxy("https://api.openai.com/v1") is None


def test_the_proxy_for_the_upstreams_scheme_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain.corp:80")
    assert forward_proxy("https://api.openai.com/v1") == "http://proxy.corp:3128"
    assert forward_proxy("http://vllm.local:8000/v1") == "http://plain.corp:80"


def test_all_proxy_stands_for_any_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALL_PROXY", "http://all.corp:3128")
    assert forward_proxy("https://api.openai.com/v1") == "http://all.corp:3128"


def test_a_proxy_without_a_scheme_is_taken_as_http(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "proxy.corp:3128")
    assert forward_proxy("https://api.openai.com/v1") == "http://proxy.corp:3128"


def test_no_proxy_names_the_hosts_that_go_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "internal.corp,localhost")
    assert forward_proxy("https://llm.internal.corp/v1") is None
    assert forward_proxy("https://api.openai.com/v1") == "http://proxy.corp:3128"


def test_a_socks_proxy_is_refused_and_its_password_is_not_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "socks5://user:hunter22@socks.corp:1080")
    with pytest.raises(ValueError, match="socks5://; only http:// and https://") as refused:
        forward_proxy("https://api.openai.com/v1")
    assert "hunter22" not in str(refused.value)
    assert "socks5://socks.corp:1080" in str(refused.value)
