"""The peers benchmark's equivalence check, on what the peers really answered (their saved
answers, tests/fixtures/peers): each is the scripted turn, and an answer that differs in its text,
call or finish is reported, not timed. No server is started and nothing is timed here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import peers, sidebyside
from bench.__main__ import arguments

SAVED = Path(__file__).parent.parent / "fixtures/peers"
ANSWERS = sorted(SAVED.glob("*/*.txt"))
EVENTS = {  # SSE events per stream, as each server sends the turn
    "aimock": {"chat": 6, "responses": 13, "anthropic": 9, "gemini": 2},
    "llm-mock-api": {"chat": 6, "responses": 13, "anthropic": 9},
    "llmock": {"chat": 13, "responses": 20, "anthropic": 17, "gemini": 7},
    "litellm": {"chat": 3, "responses": 16, "anthropic": 9},
}


def test_every_peer_and_api_it_serves_has_saved_answers() -> None:
    saved = {(p.parent.name, p.stem) for p in ANSWERS}
    for peer in peers.PEERS:
        for api in peer.apis:
            assert {(peer.name, f"{api}-json"), (peer.name, f"{api}-stream")} <= saved


@pytest.mark.parametrize("path", ANSWERS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_saved_answer_is_the_scripted_turn(path: Path) -> None:
    api, kind = path.stem.rsplit("-", 1)
    answer = sidebyside.heard(api, path.read_bytes(), kind == "stream")
    assert answer.differences(api) == []
    expected = EVENTS[path.parent.name][api] if kind == "stream" else 0
    assert answer.events == expected


def test_an_answer_that_differs_is_reported_by_what_differs() -> None:
    raw = (SAVED / "aimock/chat-stream.txt").read_bytes()
    changed = raw.replace(b"ls -la", b"rm -rf /").replace(b'"tool_calls"}', b'"stop"}')
    answer = sidebyside.heard("chat", changed, True)
    assert answer.differences("chat") == [
        "arguments {'command': 'rm -rf /'}",
        "finish 'stop'",
    ]
    assert sidebyside.heard("anthropic", b"not json", False).differences("anthropic") == [
        "text None",
        "call None",
        "arguments None",
        "finish None",
    ]


def test_the_requests_are_each_apis_own() -> None:
    assert (
        sidebyside.call("gemini", True)[0] == "/v1beta/models/bench:streamGenerateContent?alt=sse"
    )
    assert b'"stream":true' in sidebyside.call("anthropic", True)[1]
    assert b'"stream"' not in sidebyside.call("responses", False)[1]


def test_peers_are_chosen_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert arguments(["peers", "--peers", "aimock,llmock"]).peers == ["aimock", "llmock"]
    with pytest.raises(SystemExit):
        arguments(["peers", "--peers", "aimock,wiremock"])
    assert "unknown peer wiremock: choose from aimock, llm-mock-api" in capsys.readouterr().err
