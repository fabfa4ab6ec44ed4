"""A proxy whose upstream leads back to itself answers 508 at the first return, instead of
forwarding one request into thousands of connections; chained proxies still work."""

from __future__ import annotations

import httpx

from proxy.app import create_app
from proxy.config import Settings
from proxy.testing import listening, serving
from tests.conftest import ProxyFactory
from tests.helpers.servers import FakeUpstream, FlakyFront, running, text

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_a_proxy_whose_upstream_is_itself_answers_508() -> None:
    sock = listening()
    port = sock.getsockname()[1]
    app = create_app(Settings(upstream=f"http://127.0.0.1:{port}/v1"))
    with serving(app, sock=sock) as url:
        chat = httpx.post(url + "/v1/chat/completions", json=CHAT, timeout=30)
        models = httpx.get(url + "/v1/models", timeout=30)
        health = httpx.get(url + "/healthz", timeout=30).json()
    for answer in (chat, models):
        assert answer.status_code == 508, answer.text
        error = answer.json()["error"]
        assert error["code"] == "forwarding_loop"
        assert (
            f"127.0.0.1:{port}" in error["message"]
            and "leads back to the proxy" in error["message"]
        )
    # one hop each: the second arrival was refused, so the first went upstream once
    assert health["upstream_connections"]["open"] <= 2


def test_two_proxies_pointing_at_each_other_stop_at_the_first_return(proxy: ProxyFactory) -> None:
    relay = FlakyFront(target="", turn="never")  # a plain HTTP hop in between
    with running(relay.app) as relay_url, proxy(upstream=relay_url + "/v1") as url:
        relay.target = url.removesuffix("/v1")
        answer = httpx.post(url + "/chat/completions", json=CHAT, timeout=30)
    assert answer.status_code == 508 and answer.json()["error"]["code"] == "forwarding_loop"


def test_a_chain_of_two_proxies_reaches_the_model(
    proxy: ProxyFactory, upstream: tuple[FakeUpstream, str]
) -> None:
    fake, upstream_url = upstream
    fake.then(text("through both"))
    with proxy(upstream=upstream_url) as inner, proxy(upstream=inner) as outer:
        answer = httpx.post(outer + "/chat/completions", json=CHAT, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "through both"
    # each hop adds its own mark (the fake keeps the last Via line): the outer's is not the inner's
    assert fake.requests[0].headers["via"].startswith("1.1 replay-proxy-")
