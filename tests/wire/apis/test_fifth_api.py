"""A new API is one module and one row: tests/helpers/plain_api.py defines a small API of its own
(parsing, rendering, splice, read-back, history, error shape) and its `Api` row, and nothing else
in the proxy is told about it. Handed to create_app beside the built-in rows, it takes part
in everything an API does, over real sockets: scripted turns as JSON and as a stream, the live
part forwarded to its path upstream (the proxy's key in the API's own key header, a client's
never written down), a divergence and a malformed body answered in its own error
shape, the exchange recorded with its answer read back, and its path in the OpenAPI document.
A run whose calls come without ids is recorded live, then replayed strictly from that recording
with the usage the API reported (its own field, read by its row), and exported as a rollout.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.responses import Response

from proxy.apis import APIS
from proxy.app import create_app
from proxy.config import Settings
from tests.helpers.plain_api import KEY_HEADER, MADE_UP, PATH, PLAIN, read_answer
from tests.helpers.servers import FakeUpstream, Seen, running

TASK = "Make notes.txt, then say so."
SCRIPT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": TASK},
    {
        "role": "assistant",
        "content": "Listing first.",
        "tool_calls": [
            {"id": "call_P1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_P1", "content": "a.txt"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_P2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "touch notes.txt"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_P2", "content": ""},
]  # fmt: skip
CLIENT_KEY, PROXY_KEY = "plain-client-key-0123", "plain-proxy-key-4567"
OPENING = [{"role": "system", "text": "You are terse."}, {"role": "user", "text": TASK}]


def _live(seen: Seen) -> Response:
    body = {"id": "up", "model": "m", "text": "Done: notes.txt made.", "calls": [], "done": "text"}
    return Response(orjson.dumps(body), media_type="application/json")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, FakeUpstream, Path]]:
    trajectory = tmp_path / "run.json"
    trajectory.write_text(json.dumps(SCRIPT))
    upstream = FakeUpstream(fallback=_live)
    records = tmp_path / "records"
    with running(upstream.app) as up:
        settings = Settings(
            trajectory=(trajectory,),
            upstream=up + "/v1",
            upstream_api_key=PROXY_KEY,
            record_dir=records,
        )
        with running(create_app(settings, apis=(*APIS, PLAIN))) as url:
            yield url, upstream, records


def ask(url: str, turns: list[Any], *, stream: bool = False, session: str = "s1") -> httpx.Response:
    body = {"model": "m", "stream": stream, "tools": ["bash"], "turns": turns}
    headers = {"x-session-affinity": session, KEY_HEADER: CLIENT_KEY}
    return httpx.post(url + PATH, json=body, headers=headers, timeout=30)


def agent(answer: dict[str, Any]) -> dict[str, Any]:
    return {"role": "agent", "text": answer["text"], "calls": answer["calls"]}


def test_a_session_is_served_its_script_then_goes_live_through_the_new_api(
    served: tuple[str, FakeUpstream, Path],
) -> None:
    url, upstream, records = served
    first = ask(url, OPENING)
    assert first.status_code == 200, first.text
    answer = first.json()
    assert answer["done"] == "calls"
    assert answer["calls"] == [{"id": "call_P1", "name": "bash", "args": '{"command": "ls"}'}]
    assert answer["text"] == "Listing first."

    turns = [*OPENING, agent(answer), {"role": "tool", "id": "call_P1", "output": "a.txt"}]
    second = ask(url, turns, stream=True)
    assert second.status_code == 200
    assert second.headers["content-type"].startswith("text/event-stream")
    streamed = read_answer(second.content, True)
    assert streamed.finish_reason == "tool_calls"
    assert streamed.message is not None
    call = streamed.message["tool_calls"][0]
    assert (call["id"], call["function"]["arguments"]) == (
        "call_P2",
        '{"command": "touch notes.txt"}',
    )
    assert upstream.requests == []  # both turns came from the script

    done = {"role": "agent", "text": "", "calls": [{"id": "call_P2", "name": "bash", "args": call["function"]["arguments"]}]}  # fmt: skip
    turns = [*turns, done, {"role": "tool", "id": "call_P2", "output": ""}]
    live = ask(url, turns)
    assert live.status_code == 200
    assert live.json()["text"] == "Done: notes.txt made."
    [sent] = upstream.posts(PATH)  # its own path upstream, the conversation as the client sent it
    assert sent.json["turns"] == turns
    # the proxy's key in the API's own key header (its dialect), not as a Bearer
    assert sent.headers[KEY_HEADER] == PROXY_KEY and "authorization" not in sent.headers
    written = "".join(f.read_text() for f in records.rglob("*.jsonl"))
    assert CLIENT_KEY not in written and PROXY_KEY not in written

    lines = [json.loads(line) for f in sorted(records.rglob("*.jsonl")) for line in f.read_text().splitlines()]  # fmt: skip
    recorded = [x for x in lines if x.get("api") == "plain"]
    assert [x["source"] for x in recorded] == ["scripted", "scripted", "upstream"]
    # each answer read back through the row's read_answer: the calls as chat messages
    assert recorded[0]["message"]["tool_calls"][0]["id"] == "call_P1"
    assert recorded[2]["message"]["content"] == "Done: notes.txt made."
    # and its request's conversation read as chat messages through the row, as a recording is
    history = PLAIN.to_chat(recorded[2]["request"], "recorded")
    assert history is not None
    assert [m["role"] for m in history] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert history[4]["tool_calls"][0]["id"] == "call_P2"


def test_a_divergence_and_a_malformed_body_are_answered_in_the_new_apis_error_shape(
    served: tuple[str, FakeUpstream, Path],
) -> None:
    url, upstream, _ = served
    wrong = {"role": "agent", "text": "", "calls": [{"id": "call_X", "name": "bash", "args": "{}"}]}
    diverged = ask(url, [*OPENING, wrong, {"role": "tool", "id": "call_X", "output": ""}])
    assert diverged.status_code == 404
    problem = diverged.json()["problem"]
    assert problem["status"] == 404
    assert "turns[2].calls[0].id" in problem["detail"] and "call_P1" in problem["detail"]

    malformed = ask(url, [*OPENING, "not an object"], session="s2")
    assert malformed.status_code == 400
    assert malformed.json() == {
        "problem": {"status": 400, "detail": "turns[2] must be an object with a role"}
    }
    assert upstream.requests == []  # neither went anywhere


def test_the_openapi_document_lists_the_new_api_from_its_row(
    served: tuple[str, FakeUpstream, Path],
) -> None:
    url, _, _ = served
    paths = httpx.get(url + "/openapi.json").json()["paths"]
    assert paths[PATH]["post"]["summary"].startswith("The plain test API")
    assert "plain-shaped" in paths[PATH]["post"]["responses"]["400"]["description"]
    assert "/v1beta/models/{model}:generateContent" in paths  # and the built-in ones still


ADMIN = "plain-admin-token-8f3Kq2"
LS = '{"command": "ls"}'
LOOKED = {"role": "agent", "text": "Looking.", "calls": [{"name": "bash", "args": LS}]}
ANSWERED = {"role": "tool", "name": "bash", "output": "a.txt"}  # by the call's name: no id


def _idless(seen: Seen) -> Response:
    """The model of the API, answering with calls that carry no id, and its usage as `spent`."""
    if not any(t["role"] == "agent" for t in seen.json["turns"]):
        calls = [{"name": "bash", "args": LS}]
        body = {"id": "up-1", "model": "m", "text": "Looking.", "calls": calls, "done": "calls"}
        body["spent"] = {"in": 120, "out": 9}
    else:
        body = {"id": "up-2", "model": "m", "text": "One file.", "calls": [], "done": "text"}
        body["spent"] = {"in": 150, "out": 4}
    return Response(orjson.dumps(body), media_type="application/json")


def _status(url: str, session: str) -> dict[str, Any]:
    got = httpx.get(
        f"{url}/replay/sessions/{session}", headers={"authorization": f"Bearer {ADMIN}"}
    )
    assert got.status_code == 200, got.text
    return dict(got.json())


def test_an_id_less_run_is_recorded_then_replayed_strictly_with_its_own_usage(
    tmp_path: Path,
) -> None:
    records = tmp_path / "records"
    upstream = FakeUpstream(fallback=_idless)
    with running(upstream.app) as up:
        settings = Settings(
            upstream=up + "/v1", upstream_api_key=PROXY_KEY, record_dir=records, admin_token=ADMIN
        )
        with running(create_app(settings, apis=(*APIS, PLAIN))) as url:
            first = ask(url, OPENING, session="run")
            assert first.json()["calls"] == [{"name": "bash", "args": LS}]  # no id, as sent
            last = ask(url, [*OPENING, LOOKED, ANSWERED], session="run")
            assert last.json()["text"] == "One file."
            rollout = httpx.get(
                f"{url}/replay/sessions/run/rollout", headers={"authorization": f"Bearer {ADMIN}"}
            )
    # the rollout read the recording through the row: both answers' usage, from `spent`
    assert rollout.status_code == 200, rollout.text
    usage = rollout.json()["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (270, 13)
    recording = records / "run.jsonl"

    strict = Settings(trajectory=(recording,), mode="strict", admin_token=ADMIN)
    with running(create_app(strict, apis=(*APIS, PLAIN))) as url:
        again = ask(url, OPENING, session="run")
        assert again.status_code == 200, again.text
        assert again.headers["x-replay-source"] == "scripted"
        # the recorded answer as it was: its call with no id, the usage the API reported
        assert again.json()["calls"] == [{"name": "bash", "args": LS}]
        assert again.json()["spent"] == {"in": 120, "out": 9}
        # asked as a stream, the turn is rendered by the row: the made-up id stays the proxy's
        # own, and the usage is the recorded one, read through the row's read_usage
        streamed = ask(url, [*OPENING, LOOKED, ANSWERED], session="run", stream=True)
        assert streamed.status_code == 200, streamed.text
        events = [
            orjson.loads(e[6:]) for e in streamed.text.split("\n\n") if e.startswith("data: {")
        ]
        assert events[0]["text"] == "One file."
        assert events[-1] == {"done": "text", "spent": {"in": 150, "out": 4}}
        assert MADE_UP not in streamed.text
        assert _status(url, "run")["usage"] == {"recorded": 2, "estimated": 0}

        # a run whose tool printed something else is not the recorded run
        ask(url, OPENING, session="changed")
        changed = ask(url, [*OPENING, LOOKED, {**ANSWERED, "output": "b.txt"}], session="changed")
        assert changed.status_code != 200
        detail = changed.json()["problem"]["detail"]
        assert "strict replay" in detail and "turns[3].output" in detail, detail
