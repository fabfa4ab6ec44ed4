"""The tap: the client's own credentials found for scrubbing, and each way an exchange ends
(forwarded, rendered, an error the proxy made) written to the recording without them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.apis import CHAT, Api
from proxy.errors import BadRequest
from proxy.recording.recorder import REDACTED, Exchange, Recorder
from proxy.recording.tap import Tap, client_secrets
from proxy.upstream import Captured

CLIENT_KEY = "sk-client-0123456789abcdef"


def test_the_clients_credentials_are_found_in_each_header_and_the_query() -> None:
    secrets = client_secrets(
        {
            "authorization": f"Bearer {CLIENT_KEY}",
            "x-api-key": "sk-ant-key-1",
            "api-key": "azure-key-2",
            "x-goog-api-key": "AIza-key-3",
            "content-type": "application/json",
        },
        "alt=sse&key=AIza%2Fquery",
    )
    assert secrets[0] == "AIza/query"  # as sent, decoded
    assert f"Bearer {CLIENT_KEY}" in secrets and CLIENT_KEY in secrets  # with and without Bearer
    assert {"sk-ant-key-1", "azure-key-2", "AIza-key-3"} <= set(secrets)
    assert "application/json" not in secrets


def test_a_lower_case_bearer_is_taken_off_too() -> None:
    assert CLIENT_KEY in client_secrets({"authorization": f"bearer {CLIENT_KEY}"})


def test_no_credentials_no_secrets() -> None:
    assert client_secrets({}, "") == ()
    assert client_secrets({"authorization": ""}, "key=") == ()


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[Recorder]:
    made = Recorder(tmp_path)
    yield made
    made.close()


def tap(recorder: Recorder, source: str = "upstream", api: Api | None = None) -> Tap:
    x = Exchange(
        session="ses_1",
        lane="main",
        api="chat",
        method="POST",
        path="/v1/chat/completions",
        source=source,
        request={"model": "m", "messages": [{"role": "user", "content": f"key {CLIENT_KEY}"}]},
    )
    secrets = client_secrets({"authorization": f"Bearer {CLIENT_KEY}"})
    started = time.perf_counter()
    return Tap(x, recorder=recorder, dumper=None, secrets=secrets, perf_start=started, api=api)


def written(recorder: Recorder) -> tuple[str, list[dict[str, Any]]]:
    text = recorder.path_for("ses_1").read_text()
    return text, [json.loads(line) for line in text.splitlines()]


COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": f"you sent {CLIENT_KEY}"},
            "finish_reason": "stop",
        }
    ],
}


async def test_a_forwarded_answer_is_recorded_without_the_key(
    recorder: Recorder,
) -> None:
    captured = Captured(status=200, content_type="application/json", limit=1 << 20)
    captured.keep(orjson.dumps(COMPLETION))
    captured.complete = True
    await tap(recorder).forwarded(captured)
    text, [line] = written(recorder)
    assert CLIENT_KEY not in text
    assert (line["status"], line["stream"]) == (200, False)
    # the answer as the upstream sent it (reading it back as a message is each API's own)
    assert line["response"]["choices"][0]["message"]["content"] == f"you sent {REDACTED}"
    assert line["response"]["id"] == "chatcmpl-1"
    assert "message" not in line or line["message"] is None  # no reader: not read back


async def test_a_forwarded_answer_is_read_back_by_the_reader_the_tap_was_given(
    recorder: Recorder,
) -> None:
    captured = Captured(status=200, content_type="application/json", limit=1 << 20)
    captured.keep(orjson.dumps(COMPLETION))
    captured.complete = True
    await tap(recorder, api=CHAT).forwarded(captured)
    text, [line] = written(recorder)
    assert CLIENT_KEY not in text
    assert line["message"] == {"role": "assistant", "content": f"you sent {REDACTED}"}
    assert line["finish_reason"] == "stop"


async def test_an_answer_over_the_limit_is_recorded_without_its_body(recorder: Recorder) -> None:
    captured = Captured(status=200, content_type="text/event-stream", limit=8)
    captured.keep(b"data: {}\n\n" * 3)
    await tap(recorder).forwarded(captured)
    _, [line] = written(recorder)
    assert line["stream"] is True and line["events"] is None and line["response"] is None
    assert "more than --max-body-bytes (8)" in line["error"]


async def test_a_rendered_stream_is_recorded_event_by_event(recorder: Recorder) -> None:
    parts = [b'data: {"a": 1}\n\n', b'data: {"b": 2}\n\n', b"data: [DONE]\n\n"]
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1"}]}
    await tap(recorder, "scripted").rendered(parts, stream=True, message=message, turn="1/3")
    _, [line] = written(recorder)
    assert line["events"] == ['data: {"a": 1}', 'data: {"b": 2}', "data: [DONE]"]  # raw
    assert (line["turn"], line["finish_reason"], line["content_type"]) == (
        "1/3",
        "tool_calls",
        "text/event-stream",
    )


async def test_an_error_the_proxy_made_is_recorded_with_its_body(recorder: Recorder) -> None:
    await tap(recorder).error(BadRequest(f"bad key {CLIENT_KEY}", param="model"))
    text, [line] = written(recorder)
    assert CLIENT_KEY not in text
    assert (line["source"], line["status"], line["error"]) == ("error", 400, f"bad key {REDACTED}")
    assert line["response"]["error"]["param"] == "model"
