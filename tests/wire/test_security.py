"""Credentials never leak, and names never escape their folders."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import ProxyFactory
from tests.helpers.agent import RECORDED, agent_step, client, follow, start_messages
from tests.helpers.servers import FakeUpstream, status, text

UPSTREAM_KEY = "sk-upstream-key-0123456789"
CLIENT_KEY = "sk-client-key-ABCDEFGHIJ"
ADMIN_TOKEN = "admin-token-ZYXWVUTSRQ"
SECRETS = (UPSTREAM_KEY, CLIENT_KEY, ADMIN_TOKEN)


def test_credentials_appear_nowhere_the_proxy_writes_or_answers(
    proxy: ProxyFactory,
    upstream: tuple[FakeUpstream, str],
    write_trajectory: Callable[..., Path],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake, upstream_url = upstream
    # the upstream echoes the key it got in an error, as some do; and answers a live turn
    fake.then(status(401, {"error": {"message": f"bad key {UPSTREAM_KEY}"}}), text("live answer"))
    seen: list[str] = []
    caplog.set_level(logging.DEBUG)
    settings = {
        "upstream": upstream_url,
        "upstream_api_key": UPSTREAM_KEY,
        "admin_token": ADMIN_TOKEN,
        "trajectory": [write_trajectory(RECORDED)],
        "record_dir": tmp_path / "rec",
        "dump_dir": tmp_path / "dumps",
        "log_level": "debug",
    }
    with proxy(**settings) as url:
        root = url.removesuffix("/v1")
        # the script chosen by request, with the admin token (never forwarded, never written)
        chosen = {"x-replay-trajectory": "run", "x-replay-token": ADMIN_TOKEN}
        c = client(url, **{"x-session-affinity": "sec-1", **chosen})
        c.api_key = CLIENT_KEY
        refused = httpx.post(
            url + "/chat/completions",
            json={"model": "m", "messages": start_messages()},
            headers={"x-session-affinity": "sec-2", "x-replay-trajectory": "run",
                     "x-replay-token": ADMIN_TOKEN[:-1]},
        )  # fmt: skip
        seen.append(refused.text)
        messages = start_messages()
        for _ in range(2):
            answer, headers = agent_step(c, messages, stream=True)
            seen.append(json.dumps(headers))
            follow(messages, answer)
        title = httpx.post(
            url + "/chat/completions",
            json={"model": "m", "messages": messages[:2]},
            headers={"authorization": f"Bearer {CLIENT_KEY}"},
        )
        seen += [title.text, json.dumps(dict(title.headers))]
        live, headers = agent_step(c, messages, stream=False)
        seen.append(json.dumps(headers))
        bad = httpx.post(
            url + "/chat/completions",
            content=b"{",
            headers={"authorization": f"Bearer {CLIENT_KEY}"},
        )
        admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
        for path in ("/replay/sessions", "/replay/sessions/sec-1", "/metrics", "/healthz"):
            seen.append(httpx.get(root + path, headers=admin).text)
        seen.append(httpx.get(root + "/replay/ui", headers=admin).text)
        seen += [
            bad.text,
            httpx.get(root + "/replay/sessions", headers={"authorization": "Bearer wrong"}).text,
        ]
    assert fake.posts()[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # it was used...
    assert refused.status_code == 401
    assert all("x-replay-token" not in r.headers for r in fake.requests)
    assert live["content"] == "live answer"
    written = [p.read_text() for p in (tmp_path / "rec").iterdir()] + [
        p.read_text() for p in (tmp_path / "dumps").iterdir()
    ]
    assert written and len(list((tmp_path / "dumps").iterdir())) == 1  # the 200, not the 401
    logs = "\n".join(r.getMessage() for r in caplog.records)
    for secret in SECRETS:
        assert secret not in logs, secret
        for text_ in [*written, *seen]:
            assert secret not in text_, (secret, text_[:300])
    assert "[redacted]" in "".join(written)  # the echoed key was caught in the recording


@pytest.mark.parametrize(
    "name", ["../escape", "a/b", "..", ".", "x" * 300, "spaced name", "semi;colon"]
)
def test_session_ids_and_trajectory_names_never_become_paths(
    proxy: ProxyFactory, name: str, tmp_path: Path
) -> None:
    with proxy(record_dir=tmp_path / "rec", trajectory_dir=tmp_path) as url:
        by_header = httpx.post(
            url + "/chat/completions",
            json={"model": "m", "messages": []},
            headers={"x-session-affinity": name},
        )
        by_trajectory = httpx.post(
            url + "/chat/completions",
            json={
                "model": "m",
                "messages": [],
                "tools": [{"type": "function", "function": {"name": "bash"}}],
            },
            headers={"x-replay-trajectory": name},
        )
        admin = httpx.put(
            url.removesuffix("/v1")
            + "/replay/sessions/"
            + httpx.URL("x").copy_with(path=name).path.lstrip("/"),
            content=b"[]",
        )
    assert by_header.status_code == 400 and by_trajectory.status_code == 400
    assert admin.status_code in (400, 404, 405)
    assert (
        not list((tmp_path / "rec").glob("**/*"))
        and not (tmp_path.parent / "escape.jsonl").exists()
    )
